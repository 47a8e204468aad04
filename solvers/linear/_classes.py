"""scikit-learn estimator for the bias-free linear hinge-loss SVM: LIBLINEAR dual CD or AVSF.

The numerical work is in :mod:`svmstream.solvers.linear._cd`; this module owns parameter validation,
label mapping (one-vs-rest for more than two classes), the per-class loop, reporting
attributes, the optional probability calibration (``probability=True``:
:class:`svmstream.solvers.calibration.MarginCalibrator` on a held-out split) and the
pickle-free state used by :mod:`solvers.persistence`.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import SELECTIONS as _SELECTIONS
from ..calibration import REFIT_BELOW_ROWS, MarginCalibrator, holdout_split
from ..persistence import register_estimator
from ..served import BatchServed
from ._cd import as_cd_input, decision_values, dual_cd
from ._state import LinearState

__all__ = ["LinearDualCDClassifier"]


def _probability_enabled(est) -> bool:
    """``available_if`` check: ``predict_proba`` exists only with ``probability=True`` (as SVC)."""
    if not est.probability:
        raise AttributeError("predict_proba is not available when probability=False")
    return True


@register_estimator
class LinearDualCDClassifier(BatchServed, LinearState, ClassifierMixin, BaseEstimator):
    """Linear SVM (hinge loss, no bias) trained by dual coordinate descent.

    Solves ``min_w 1/2 ||w||^2 + C sum_i max(0, 1 - y_i <w, x_i>)`` through its box-
    constrained dual, with either LIBLINEAR's uniform sweeps with shrinking
    (``selection="uniform"``; Hsieh et al., ICML 2008, Algorithm 3 = Algorithm 2 of
    Glasmachers & Dogan) or adaptive variable selection frequencies (Glasmachers & Dogan,
    "Accelerated Linear SVM Training with Adaptive Variable Selection Frequencies",
    arXiv:1302.5608, Algorithms 3-5): ``selection="avsf-paper"`` as published,
    ``selection="avsf"`` combined with LIBLINEAR's shrinking of variables stuck at a bound
    (fewer steps than both wherever the runs converged at C >= 10 in
    ``benchmarks/results/linear.md``; see ``docs/avsf.md``).  More than two classes are handled
    one-vs-rest (one binary problem per class, in the order of ``classes_``).

    Parameters
    ----------
    selection : {"uniform", "avsf", "avsf-paper"}, default="uniform"
        Coordinate selection rule.
    C : float, default=1.0
        Regularisation parameter (upper bound of the dual variables), > 0.
    tol : float, default=1e-3
        Stopping tolerance on the projected-gradient spread ``v_max - v_min`` of a sweep.
    max_iter : int, default=1000
        Maximum outer iterations per binary problem (one outer iteration is one sweep over
        the active set, or one AVSF schedule of about ``n_samples`` steps).
    random_state : int, RandomState instance or None, default=None
        Seeds the solver's coordinate order (one seed per binary problem) and the
        calibration split.
    probability : bool, default=False
        Enable :meth:`predict_proba` (scikit-learn's ``SVC`` convention).  ``fit`` then sets
        aside a stratified 10% of the rows (at most 5,000;
        :func:`svmstream.solvers.calibration.holdout_split`), trains on the rest and fits a
        :class:`~svmstream.solvers.calibration.MarginCalibrator` (slope / temperature on the
        decision values) on the held-out rows' decision values.  Below 20,000 rows
        (:data:`~svmstream.solvers.calibration.REFIT_BELOW_ROWS`) the model is then fitted
        again on all rows (two fits; the model and ``predict`` equal those of
        ``probability=False``); from 20,000 rows on the model of the rest is kept (one fit).
        Below 500 rows the calibrator is fitted on the training rows' own decision values
        (one fit on all rows; such in-sample probabilities tend to be over-confident).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features), float64
        Row ``k`` is the weight vector of problem ``k`` (binary: ``classes_[1]`` vs
        ``classes_[0]``; otherwise ``classes_[k]`` vs rest).
    intercept_ : ndarray of shape (n_problems,), float64
        Always zero (the model has no bias term); kept for API compatibility.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,), optional
    n_iter_ : ndarray of shape (n_problems,), int64
        Outer iterations per binary problem.
    n_steps_ : ndarray of shape (n_problems,), int64
        Coordinate steps (gradient evaluations, one sparse dot product each).
    n_updates_ : ndarray of shape (n_problems,), int64
        Steps that changed a dual variable (one sparse axpy each).
    converged_ : ndarray of shape (n_problems,), bool
    dual_objective_ : ndarray of shape (n_problems,), float64
        ``sum_i alpha_i - 1/2 ||w||^2`` at the end of each run.
    primal_objective_ : ndarray of shape (n_problems,), float64
        ``1/2 ||w||^2 + C sum_i max(0, 1 - y_i <w, x_i>)``.
    fit_time_ : float
        Wall-clock seconds of the solver runs (sum over problems; input conversion
        excluded).
    calibrator_ : MarginCalibrator or None
        The probability calibration (None when fitted with ``probability=False``).
    calibration_ : {"held-out", "held-out-refit", "in-sample"} or None
        How ``calibrator_`` was fitted: on held-out rows (model trained on the rest), on
        held-out rows of a first fit with the model refitted on all rows, or in-sample.

    Notes
    -----
    ``decision_function`` and ``predict`` on CSR input cost O(nnz * n_problems); sparse
    input is never densified.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from svmstream.solvers import LinearDualCDClassifier
    >>> X, y = make_classification(n_samples=400, n_features=20, random_state=0)
    >>> clf = LinearDualCDClassifier(selection="avsf", C=0.1, tol=0.01, random_state=0)
    >>> clf = clf.fit(X[:300], y[:300])
    >>> round(clf.score(X[300:], y[300:]), 2), clf.coef_.shape
    (0.84, (1, 20))
    """

    def __init__(
        self, selection="uniform", C=1.0, tol=1e-3, max_iter=1000, random_state=None, probability=False
    ):
        self.selection = selection
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state
        self.probability = probability

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def check_params(self):
        """Validate the parameters; returns self.

        Raises
        ------
        ValueError
            Naming the first invalid parameter.
        """
        if self.selection not in _SELECTIONS:
            raise ValueError(f"selection must be one of {_SELECTIONS}, got {self.selection!r}")
        for name in ("C", "tol"):
            value = getattr(self, name)
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or not np.isfinite(value)
                or value <= 0
            ):
                raise ValueError(f"{name} must be a positive finite number, got {value!r}")
        if (
            not isinstance(self.max_iter, numbers.Integral)
            or isinstance(self.max_iter, bool)
            or self.max_iter < 1
        ):
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        if not isinstance(self.probability, (bool, np.bool_)):
            raise ValueError(f"probability must be a bool, got {self.probability!r}")
        return self

    def fit(
        self,
        X,
        y,
        *,
        progress: Callable[[dict], Any] | None = None,
        should_stop: Callable[[], bool] | None = None,
    ):
        """Train one bias-free linear SVM per binary problem.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Converted to float64; sparse input to CSR (int32 indices, int64 indptr).
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).
        progress : callable(dict), optional
            Called after every solver kernel call with the keys of
            :func:`svmstream.solvers.linear._cd.dual_cd` plus ``problem`` (index), ``n_problems`` and
            ``label`` (the positive class, as a string).
        should_stop : callable() -> bool, optional
            Checked before every kernel call (at least once per ``n_samples`` coordinate
            steps); returning true raises :class:`svmstream.solvers.Cancelled`; the
            estimator's fitted attributes are then those it had before (none if it was
            never fitted).

        Returns
        -------
        self : LinearDualCDClassifier

        Raises
        ------
        ValueError
            On invalid parameters, fewer than two classes, or invalid ``X`` / ``y``.
        Cancelled
            When ``should_stop()`` returns true.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C", reset=True)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the data, "
                f"but the data contain only one class: {classes[0]!r}"
            )
        fitted, calibrator, calibration = self._fit_calibrated(X, y, classes, progress, should_stop)
        converged = fitted["converged_"]
        if not converged.all():
            warnings.warn(
                f"{type(self).__name__} reached max_iter={self.max_iter} before the stopping "
                f"rule held on {int((~converged).sum())} of {converged.shape[0]} problem(s); "
                "increase max_iter or tol.",
                ConvergenceWarning,
                stacklevel=2,
            )
        # all attributes at once, after every solve: a cancelled fit leaves the previous ones
        self.classes_ = classes
        for name, value in fitted.items():
            setattr(self, name, value)
        self.calibrator_ = calibrator
        self.calibration_ = calibration
        return self

    def _fit_calibrated(self, X, y, classes, progress, should_stop):
        """The fitted attributes and, with ``probability``, the calibrator and its split:
        ``(fitted, calibrator, calibration)`` (a model of the training part calibrated on the
        held-out rows, refitted on all rows below ``REFIT_BELOW_ROWS``; in-sample without a
        split)."""
        y_index = np.searchsorted(classes, y)
        split = holdout_split(y_index, classes.shape[0], self.random_state) if self.probability else None
        calibrator = calibration = None
        if split is not None:
            # calibrate a model of the training part on the held-out rows
            fitted = self._solve(X[split[0]], y[split[0]], classes, progress, should_stop)
            margins = self._scores(decision_values(X[split[1]], fitted["coef_"]))
            calibrator = MarginCalibrator(classes.shape[0]).fit(margins, y_index[split[1]])
            calibration = "held-out"
            if X.shape[0] < REFIT_BELOW_ROWS:
                # small data: the served model is fitted on all rows (as with probability=False)
                fitted = self._solve(X, y, classes, progress, should_stop)
                calibration = "held-out-refit"
        else:
            fitted = self._solve(X, y, classes, progress, should_stop)
            if self.probability:
                margins = self._scores(decision_values(X, fitted["coef_"]))
                calibrator = MarginCalibrator(classes.shape[0]).fit(margins, y_index)
                calibration = "in-sample"
        return fitted, calibrator, calibration

    def _solve(self, X, y, classes, progress, should_stop) -> dict[str, Any]:
        """Solve the binary problems on validated rows; returns the fitted attributes by name
        (``coef_``, ``intercept_``, ``n_iter_``, ..., ``fit_time_``) without setting them."""
        inp = as_cd_input(X)
        rng = check_random_state(self.random_state)
        targets = classes[1:] if classes.shape[0] == 2 else classes
        n_problems = targets.shape[0]
        coef = np.zeros((n_problems, inp.n_features), dtype=np.float64)
        n_iter = np.zeros(n_problems, dtype=np.int64)
        n_steps = np.zeros(n_problems, dtype=np.int64)
        n_updates = np.zeros(n_problems, dtype=np.int64)
        converged = np.zeros(n_problems, dtype=bool)
        dual = np.zeros(n_problems, dtype=np.float64)
        primal = np.zeros(n_problems, dtype=np.float64)
        fit_time = 0.0
        for k, label in enumerate(targets):
            yk = np.where(y == label, 1.0, -1.0)
            seed = int(rng.randint(0, np.iinfo(np.int32).max))
            report = None
            if progress is not None:

                def report(info, _k=k, _label=str(label)):
                    info.update(problem=_k, n_problems=n_problems, label=_label)
                    progress(info)

            res = dual_cd(
                inp,
                yk,
                C=float(self.C),
                tol=float(self.tol),
                max_iter=int(self.max_iter),
                selection=self.selection,
                seed=seed,
                progress=report,
                should_stop=should_stop,
            )
            coef[k] = res.w
            n_iter[k] = res.n_iter
            n_steps[k] = res.n_steps
            n_updates[k] = res.n_updates
            converged[k] = res.converged
            dual[k] = res.dual
            primal[k] = res.primal
            fit_time += res.wall_time
        return {
            "coef_": coef,
            "intercept_": np.zeros(n_problems, dtype=np.float64),
            "n_iter_": n_iter,
            "n_steps_": n_steps,
            "n_updates_": n_updates,
            "converged_": converged,
            "dual_objective_": dual,
            "primal_objective_": primal,
            "fit_time_": fit_time,
        }

    @staticmethod
    def _scores(scores):
        """(n, n_problems) decision values -> (n,) for one problem (binary), else unchanged."""
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def decision_function(self, X):
        """Signed distances ``X @ coef_.T`` (O(nnz * n_problems) for sparse ``X``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (positive means ``classes_[1]``),
        else (n_samples, n_classes), float64.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        ValueError
            If ``X`` has a different number of features than seen in ``fit``.
        """
        check_is_fitted(self, "coef_")
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return self._scores(decision_values(X, self.coef_))

    def predict(self, X):
        """Predicted class labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,), same dtype as ``classes_``.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    @available_if(_probability_enabled)
    def predict_proba(self, X):
        """Calibrated class probabilities (only with ``probability=True``).

        ``calibrator_`` applied to :meth:`decision_function`: ``sigmoid(a f)`` for two classes,
        ``softmax(a f)`` of the one-vs-rest scores otherwise (Platt 1999 without offset;
        temperature scaling, Guo et al. 2017).  The argmax of every row is the class
        :meth:`predict` gives.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), float64, columns in ``classes_`` order, rows
        summing to 1.

        Raises
        ------
        AttributeError
            With ``probability=False`` (``hasattr(est, "predict_proba")`` is False then).
        sklearn.exceptions.NotFittedError
            Before ``fit``, or if the model was fitted with ``probability=False``.
        """
        check_is_fitted(self, "coef_")
        if getattr(self, "calibrator_", None) is None:
            raise NotFittedError(
                "predict_proba needs a model fitted with probability=True; this one was fitted without"
            )
        return self.calibrator_.predict_proba(self.decision_function(X))
