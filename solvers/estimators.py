"""scikit-learn estimators for budgeted kernel SVMs trained online.

:class:`BudgetedSGDClassifier` wraps the numba BSGD step (:mod:`solvers.bsgd`): it owns
parameter validation, label mapping, densification of sparse input, the epoch loop and the
exact save/restore of the whole learner state.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import bsgd
from .merging import GSS_STANDARD_EPS
from .persistence import register_estimator

#: Sparse input is densified this many matrix elements at a time.
DENSE_CHUNK_ELEMENTS = 4_000_000
STATE_VERSION = 1


def resolve_lambda(lambda_, C, n_samples, n_rows):
    """Regularisation λ: ``lambda_`` if given, else ``1 / (C · n)``.

    ``n`` is ``n_samples`` when set, otherwise ``n_rows`` (rows of the first fit or
    partial_fit call).  C = 1/(nλ) is the usual SVM relation (Wang et al. 2012, §2).

    Raises
    ------
    ValueError
        If the resulting λ is not a positive finite number.
    """
    if lambda_ is not None:
        lam = float(lambda_)
    else:
        n = n_samples if n_samples is not None else n_rows
        lam = 1.0 / (float(C) * float(n))
    if not np.isfinite(lam) or lam <= 0.0:
        raise ValueError(f"regularisation lambda must be positive and finite, got {lam!r}")
    return lam


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
        yield np.ascontiguousarray(X[rows].toarray(), dtype=np.float64), np.arange(
            rows.shape[0], dtype=np.int64
        )


@register_estimator
class BudgetedSGDClassifier(ClassifierMixin, BaseEstimator):
    """Budgeted SGD kernel SVM (BSGD) with merging budget maintenance.

    Source: Wang, Crammer & Vucetic (2012), Algorithm 1 (Pegasos rate η_t = 1/(λt), no
    bias); merging by golden section search as in Glasmachers & Qaadan (2018), Algorithm 1.
    The model never holds more than ``budget`` support vectors.

    Parameters
    ----------
    budget : int >= 2
        Maximal number of support vectors B.
    gamma : float > 0
        Gaussian kernel width: k(x, x') = exp(−γ‖x − x'‖²).
    C : float > 0
        SVM cost; used as λ = 1/(n·C) when ``lambda_`` is None.
    lambda_ : float > 0 or None
        Regularisation λ; overrides ``C``.
    n_samples : int or None
        ``n`` in λ = 1/(n·C) for streaming use; default: rows of the first fit/partial_fit.
    epochs : int >= 1
        Passes over shuffled data in :meth:`fit`.
    gss_eps : float in (0, 1)
        Golden section search tolerance for the merge coefficient h (papers: 0.01).
    random_state : int or None
        Seed of the epoch shuffles.

    Attributes
    ----------
    classes_ : (2,) ndarray — ``classes_[0]`` maps to −1, ``classes_[1]`` to +1
    n_features_in_ : int
    lambda_eff_ : float — the λ in use
    support_vectors_ : (n_sv, d) float64; dual_coef_ : (n_sv,) float64 effective α
    n_support_vectors_, t_, n_seen_, n_merges_, n_violations_, n_maintenance_ : int
    weight_degradation_total_ : float — Σ of the WD of all maintenance events
    last_margins_ : (m,) float64 — f(x) before each step of the last fit/partial_fit
    """

    def __init__(self, budget=500, gamma=1.0, C=1.0, lambda_=None, n_samples=None, epochs=1,
                 gss_eps=GSS_STANDARD_EPS, random_state=None):
        self.budget = budget
        self.gamma = gamma
        self.C = C
        self.lambda_ = lambda_
        self.n_samples = n_samples
        self.epochs = epochs
        self.gss_eps = gss_eps
        self.random_state = random_state

    # ------------------------------------------------------------------ validation
    def _check_params(self):
        def positive(name, value, kind=numbers.Real):
            if not isinstance(value, kind) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be a positive {kind.__name__}, got {value!r}")

        positive("gamma", self.gamma)
        positive("C", self.C)
        positive("epochs", self.epochs, numbers.Integral)
        if not isinstance(self.budget, numbers.Integral) or self.budget < 2:
            raise ValueError(f"budget must be an integer >= 2, got {self.budget!r}")
        if self.lambda_ is not None:
            positive("lambda_", self.lambda_)
        if self.n_samples is not None:
            positive("n_samples", self.n_samples, numbers.Integral)
        if not 0.0 < self.gss_eps < 1.0:
            raise ValueError(f"gss_eps must be in (0, 1), got {self.gss_eps!r}")

    def _labels_to_signs(self, y):
        """Map labels to ±1 float64; raises ValueError naming the first unknown label."""
        positive = y == self.classes_[1]
        known = positive | (y == self.classes_[0])
        if not known.all():
            bad = int(np.flatnonzero(~known)[0])
            label = y[bad].item() if isinstance(y[bad], np.generic) else y[bad]
            raise ValueError(
                f"y[{bad}]: unknown label {label!r}; classes are {self.classes_.tolist()}"
            )
        return np.where(positive, 1.0, -1.0)

    # ------------------------------------------------------------------ state
    def _init_state(self, n_features, classes, n_rows):
        classes = np.unique(np.asarray(classes))
        if classes.shape[0] != 2:
            raise ValueError(
                f"BudgetedSGDClassifier is binary and needs exactly 2 classes, got {classes.tolist()}"
            )
        self.classes_ = classes
        self.n_features_in_ = int(n_features)
        self.lambda_eff_ = resolve_lambda(self.lambda_, self.C, self.n_samples, n_rows)
        cap = int(self.budget) + 1
        self._sv_t = np.zeros((self.n_features_in_, cap), dtype=np.float64)
        self._sv_sq = np.zeros(cap, dtype=np.float64)
        self._coef = np.zeros(cap, dtype=np.float64)
        self._counters = np.zeros(bsgd.N_COUNTERS, dtype=np.int64)
        self._reals = np.zeros(bsgd.N_REALS, dtype=np.float64)
        self._reals[bsgd.R_SCALE] = 1.0
        self._x_buf = np.zeros(self.n_features_in_, dtype=np.float64)
        self._row_buf = np.zeros(cap, dtype=np.float64)
        self.rng_ = np.random.default_rng(self.random_state)

    def _apply(self, X, signs, order):
        """Run BSGD steps over ``X[order]``; returns the pre-update margins (len(order),)."""
        margins = np.empty(order.shape[0], dtype=np.float64)
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            y_part = signs if X_part is X else signs[order[done : done + local_order.shape[0]]]
            out = margins[done : done + local_order.shape[0]]
            bsgd.bsgd_binary_steps(
                X_part, y_part, local_order, self._sv_t, self._sv_sq, self._coef,
                self._counters, self._reals, float(self.gamma), self.lambda_eff_,
                int(self.budget), float(self.gss_eps), out, self._x_buf, self._row_buf,
            )
            done += local_order.shape[0]
        self.last_margins_ = margins
        return margins

    def _validate_X(self, X, reset):
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        return X if sp.issparse(X) else np.ascontiguousarray(X)

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y):
        """Train from scratch for ``epochs`` shuffled passes.

        X : (n, d) array-like or scipy sparse; y : (n,) labels of exactly two classes.
        Raises ValueError on non-finite input, mismatched lengths or a label count ≠ 2.
        """
        self._check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_classification_targets(y)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._init_state(X.shape[1], np.unique(y), X.shape[0])
        signs = self._labels_to_signs(y)
        for _ in range(int(self.epochs)):
            self._apply(X, signs, self.rng_.permutation(X.shape[0]).astype(np.int64))
        return self

    def partial_fit(self, X, y, classes=None):
        """Apply one BSGD step per row of X, in order.

        ``classes`` (both labels) is required on the first call.  Raises ValueError on
        non-finite input, a feature count different from the first call, or an unknown label;
        the model is unchanged in that case.
        """
        first = not hasattr(self, "classes_")
        if first:
            self._check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        if first:
            self._init_state(X.shape[1], classes, X.shape[0])
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(
                f"classes {list(classes)} differ from the first call's {self.classes_.tolist()}"
            )
        signs = self._labels_to_signs(np.asarray(y))
        self._apply(X, signs, np.arange(X.shape[0], dtype=np.int64))
        return self

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """Signed margins f(x) = Σ_j α_j k(sv_j, x) (+ side = ``classes_[1]``); (n,) float64."""
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        out = np.empty(X.shape[0], dtype=np.float64)
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        order = np.arange(X.shape[0], dtype=np.int64)
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            part = out[done : done + local_order.shape[0]]
            bsgd.rbf_decision_batch(
                X_part, self._sv_t, self._sv_sq, self._coef, self.n_support_vectors_,
                float(self.gamma), float(self._reals[bsgd.R_SCALE]), part, self._row_buf,
            )
            done += local_order.shape[0]
        return out

    def predict(self, X):
        """Predicted labels (n,) from ``classes_``."""
        return self.classes_[(self.decision_function(X) > 0).astype(np.intp)]

    # ------------------------------------------------------------------ statistics
    @property
    def n_support_vectors_(self):
        return int(self._counters[bsgd.C_N_SV])

    @property
    def t_(self):
        return int(self._counters[bsgd.C_STEPS])

    @property
    def n_seen_(self):
        return int(self._counters[bsgd.C_STEPS])

    @property
    def n_merges_(self):
        return int(self._counters[bsgd.C_MERGES])

    @property
    def n_violations_(self):
        return int(self._counters[bsgd.C_VIOLATIONS])

    @property
    def n_maintenance_(self):
        return int(self._counters[bsgd.C_MAINTENANCE])

    @property
    def weight_degradation_total_(self):
        return float(self._reals[bsgd.R_WD_SUM])

    @property
    def support_vectors_(self):
        return self._sv_t[:, : self.n_support_vectors_].T.copy()

    @property
    def dual_coef_(self):
        return self._coef[: self.n_support_vectors_] * self._reals[bsgd.R_SCALE]

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
            "counters": self._counters.copy(),
            "reals": self._reals.copy(),
        }
        meta = {
            "estimator": type(self).__name__,
            "state_version": STATE_VERSION,
            "params": self.get_params(),
            "n_features_in": self.n_features_in_,
            "lambda_eff": self.lambda_eff_,
            "rng_state": self.rng_.bit_generator.state,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild an estimator that continues exactly where :meth:`get_state` left off."""
        if meta.get("state_version") != STATE_VERSION:
            raise ValueError(f"unsupported {cls.__name__} state version {meta.get('state_version')}")
        est = cls(**meta["params"])
        est._init_state(meta["n_features_in"], arrays["classes"], 1)
        est.lambda_eff_ = float(meta["lambda_eff"])
        n = arrays["coef"].shape[0]
        if n > est.budget or arrays["sv_t"].shape != (est.n_features_in_, n):
            raise ValueError("saved support vectors do not fit the saved budget/dimension")
        est._sv_t[:, :n] = arrays["sv_t"]
        est._sv_sq[:n] = arrays["sv_sq"]
        est._coef[:n] = arrays["coef"]
        est._counters[:] = arrays["counters"]
        est._reals[:] = arrays["reals"]
        est.rng_.bit_generator.state = meta["rng_state"]
        return est
