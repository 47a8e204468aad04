"""Pegasos: the online linear SVM on an explicit weight matrix (Shalev-Shwartz, Singer, Srebro
& Cotter 2011), with BSGD's schedules (:mod:`._sgd`) and the kernel model's state, labels,
counters and persistence (:class:`._base.BudgetedKernelModel`): no support vectors; its steps
are :mod:`._linear`'s kernels."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_is_fitted

from .._params import BUDGET_MIN, REFERENCE_N_LINEAR, SCHEDULES, keep_params, parameter_constraints
from ..persistence import register_estimator
from ._base import BudgetedKernelModel, resolve_lambda
from ._gss import GSS_STANDARD_EPS
from ._linear import linear_decision, linear_steps_csr, linear_steps_dense, pack_weights, unpack_weights
from ._preprocessing import csr_arrays
from ._publish import note_weight_rows
from ._sgd import SCHEDULE_PARAMS, ScheduleChecks
from ._state import C_SCHED_SHIFT, C_STEPS, R_SCALE
from ._weights import unit_weights


@register_estimator
class PegasosClassifier(ScheduleChecks, BudgetedKernelModel):
    """Online linear SVM: Pegasos on an explicit weight matrix W (d, K).

    Source: Shalev-Shwartz, Singer, Srebro & Cotter (2011), "Pegasos", Algorithm 1 with the
    scale trick (w = s·W); multi-class by Crammer–Singer (one column per class).  The same
    schedules as :class:`BudgetedSGDClassifier`; CSR rows stay sparse (O(nnz·K) per step).
    No support vectors and no hidden preprocessing.

    Parameters
    ----------
    C : float in (0, 1e10], default=1.0
        λ = 1/(n·C) when ``lambda_`` is None, n = ``n_samples``, else :meth:`fit`'s rows,
        else 5,000 for a stream.
    lambda_, n_samples, epochs, schedule, eta, radius, fit_intercept, random_state :
        As in :class:`BudgetedSGDClassifier`.

    Attributes
    ----------
    classes_, n_features_in_, lambda_eff_
    coef_ : (1, d) or (n_classes, d) float64; intercept_ : (K,) float64 —
        ``decision_function(X) = X @ coef_.T + intercept_``

    Raises
    ------
    ValueError
        On an invalid parameter (naming it), non-finite input or an unknown label.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from svmstream.solvers import PegasosClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(), PegasosClassifier(C=1.0, epochs=5, random_state=0))
    >>> round(clf.fit(X[:400], y[:400]).score(X[400:], y[400:]), 2)
    0.96
    """

    _parameter_constraints: dict = parameter_constraints(
        ("C", "lambda_", "n_samples", "epochs", "random_state", *SCHEDULE_PARAMS)
    )
    # the kernel model's settings, unused by a linear model (its state keeps an SV matrix with
    # no columns: counters, reals, bias)
    kernel = "linear"
    budget = BUDGET_MIN
    gamma = "scale"
    maintenance = "merge"
    merge_solver = "gss"
    gss_eps = GSS_STANDARD_EPS
    compare_merge_solver = None
    profile = False
    sv_storage = "auto"

    def __init__(
        self, *, C=1.0, lambda_=None, n_samples=None, epochs=1, schedule="pegasos", eta=1.0, radius=None,
        fit_intercept=False, random_state=None,
    ):  # fmt: skip
        keep_params(self, locals())

    def check_params(self):
        """Validate the parameters (the family's checks, then ``_parameter_constraints``);
        returns self.  Raises ValueError naming the first invalid parameter."""
        self._check_budget_params()
        self._check_schedule_params()
        self._validate_params()
        return self

    # ------------------------------------------------------------------ no kernel
    def _linear(self):
        return True

    def _given_gamma(self):
        return None  # no kernel: no γ

    def _resolve_gamma(self, X):
        return None

    def use_gamma(self, gamma):
        """No kernel: γ is not used; returns self."""
        return self

    def _load_gamma(self, meta):
        if "gamma" in meta:
            self.gamma_ = meta["gamma"]

    def _resolve_sv_storage(self, X, scaling="none"):
        self.sv_storage_ = None  # no support vectors

    def _sv_capacity(self):
        return 0

    def _resolve_lambda(self, n_rows):
        n = n_rows if n_rows is not None else REFERENCE_N_LINEAR  # a stream: the linear reference n
        return resolve_lambda(self.lambda_, self.C, self.n_samples, n)

    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True, calibrate=True):
        super()._init_state(n_features, classes, n_rows, streaming, ready, calibrate)
        self._W = np.zeros((self.n_features_in_, self._coef.shape[1]))
        self._idx_buf = np.zeros(self.n_features_in_, dtype=np.int32)

    # ------------------------------------------------------------------ the step
    def _learn(self, X, labels, order, weights=None):
        """One Pegasos step per row of ``X[order]`` (CSR rows stay sparse), ``weights`` (n,)
        float64 importance weights (None: ones); returns f before each."""
        n_cols = self._W.shape[1]
        margins = np.empty((order.shape[0], n_cols), dtype=np.float64)
        args = (
            np.ascontiguousarray(labels, dtype=np.float64),
            unit_weights(labels.shape[0]) if weights is None else weights,
            order,
            self._W,
            self._bias,
            self._counters,
            self._reals,
            self.lambda_eff_,
            float(self.eta),
            float(self._radius()),
            SCHEDULES[self.schedule],
            bool(self.fit_intercept),
            margins,
            self._f_buf,
        )
        scale_before = float(self._reals[R_SCALE])
        first = self._counters[C_STEPS] - self._counters[C_SCHED_SHIFT] < 1  # a first step may clear W
        if sp.issparse(X):
            linear_steps_csr(*csr_arrays(X), *args)
            rows = np.unique(X.indices)
        else:
            linear_steps_dense(np.ascontiguousarray(X, dtype=np.float64), *args, self._x_buf, self._idx_buf)
            rows = np.flatnonzero((X != 0).any(axis=0))
        # the rows of W this batch may have changed, for publishing (a scale folded into W: all)
        note_weight_rows(self, None if first or self._reals[R_SCALE] > scale_before else rows)
        self.last_margins_ = margins[:, 0] if n_cols == 1 else margins
        return self.last_margins_

    def decision_function(self, X):
        """f(x) = w·x (+ b): (n,) float64 binary, (n, n_classes) otherwise."""
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        out = linear_decision(X, self._W, self._bias, self._reals[R_SCALE])
        return out[:, 0] if out.shape[1] == 1 else out

    def _add_class_arrays(self, rehearsal=None):
        k = self.classes_.shape[0]
        super()._add_class_arrays(rehearsal)
        W = np.zeros((self._W.shape[0], k + 1))  # binary w → (−w/2, w/2, 0), as the coefficients
        if k == 2:
            W[:, 0], W[:, 1] = -0.5 * self._W[:, 0], 0.5 * self._W[:, 0]
        else:
            W[:, :k] = self._W
        self._W = W

    def _grow_arrays(self, d_new):
        super()._grow_arrays(d_new)
        W = np.zeros((d_new, self._W.shape[1]))
        W[: self._W.shape[0]] = self._W
        self._W = W
        self._idx_buf = np.zeros(d_new, dtype=np.int32)

    @property
    def coef_(self):
        """The weights, (1, d) binary or (n_classes, d): w = scale · W."""
        check_is_fitted(self, "classes_")
        return (self._reals[R_SCALE] * self._W).T.copy()

    def statistics(self):
        """:meth:`BudgetedKernelModel.statistics` without support vectors or budget (``budget``
        None, ``kernel``, ``n_weights`` = d · K)."""
        out = super().statistics()
        out.update(kernel="linear", budget=None, n_weights=int(self._W.size))
        return out

    # ------------------------------------------------------------------ persistence
    def get_state(self):
        arrays, meta = super().get_state()
        arrays.update(pack_weights(self._W))
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        est = super().from_state(arrays, meta)
        est._W = unpack_weights(arrays, est._W.shape)
        return est
