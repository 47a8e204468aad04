"""scikit-learn estimator for DC-SVM (Hsieh, Si & Dhillon, ICML 2014).

:class:`DCSVMClassifier` trains kernel SVMs by the multilevel divide-and-conquer solver of
:mod:`svmstream.solvers.exact._dcsvm`: binary problems directly, multi-class problems one-vs-rest (one
binary DC-SVM per class).  It serves either

* the **exact** model (``early_level=None``): the solution of the whole problem to ``tol``,
  ``f(x) = sum_j alpha_j y_j k'(x, x_j)``, or
* the **early-prediction** model of level ``early_level`` (eq. 11 of the paper): training
  stops after that level and a test point uses the model of its nearest cluster.

The kernel is ``k'(x, z) = k(x, z) + bias**2``: the bias-free dual of the paper's eq. (1)
with a constant feature ``bias`` appended to every point (LIBLINEAR's ``-B``), i.e. a
regularised intercept ``b = bias**2 sum_j alpha_j y_j`` (reported as ``intercept_``).
``bias=0`` gives the paper's problem without intercept.

With ``probability=True``, :meth:`DCSVMClassifier.predict_proba` gives calibrated class
probabilities (:class:`svmstream.solvers.calibration.MarginCalibrator`, fitted on a held-out
split).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import KERNELS
from ..calibration import REFIT_BELOW_ROWS, MarginCalibrator, holdout_split
from ..persistence import register_estimator
from ..served import BatchServed
from ._dask import active_client
from ._dcsvm import DEFAULT_START_METHOD, dcsvm_fit, default_workers, make_process_pool
from ._kernels import KernelData, KernelSpec, kernel_matvec
from ._state import DCSVMState

__all__ = ["DCSVMClassifier"]


def _probability_enabled(est) -> bool:
    """``available_if`` check: ``predict_proba`` exists only with ``probability=True`` (as SVC)."""
    if not est.probability:
        raise AttributeError("predict_proba is not available when probability=False")
    return True


@register_estimator
class DCSVMClassifier(BatchServed, DCSVMState, ClassifierMixin, BaseEstimator):
    """Kernel SVM trained by multilevel DC-SVM (Hsieh, Si & Dhillon 2014, Algorithm 1).

    Parameters
    ----------
    C : float, default=1.0
        Box constraint of the dual variables (> 0).
    kernel : {"rbf", "poly", "linear"}, default="rbf"
    gamma : "scale", "auto" or float, default="scale"
        Kernel coefficient; "scale" = 1 / (n_features * X.var()), "auto" = 1 / n_features
        (as in :class:`sklearn.svm.SVC`).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=0.0
        Constant of the polynomial kernel.
    bias : float, default=1.0
        Constant feature appended to every point (kernel offset ``bias**2``); 0 = no
        intercept (the paper's eq. 1 exactly).
    k : int, default=4
        Clusters per level grow by this factor (level l has ``k**l`` clusters).
    n_levels : int, default=4
        Number of levels l_max (4 -> 256, 64, 16, 4 clusters).
    min_level : int, default=1
        Last level solved before the refine and global steps (1 = every level, the paper's
        Algorithm 1).  ``n_levels=3, min_level=2`` (64 and 16 clusters) is the fastest
        setting measured on ijcnn1 and a9a (docs/dcsvm.md): the 4-cluster level costs
        more than it saves in the global solve.
    n_sample : int, default=1000
        Points sampled for kernel k-means at every level.
    tol : float, default=1e-3
        Stop when the maximal projected-gradient violation is below ``tol``.
    level_tol : float, optional
        Tolerance of the level sub-problems (default ``tol``).
    cache_size : float, default=200.0
        Kernel-column cache in MB (shared out among worker processes).
    shrinking : bool, default=True
    refine : bool, default=True
        Solve on the level-1 support vectors before the global problem.
    early_level : int, optional
        If given, stop after this level and predict with its early-prediction model.
    max_iter : int, optional
        Coordinate updates per solve (default ``max(10**7, 100 n)``).
    n_jobs : int, optional
        Worker processes for the sub-problems (None = every available core on machines with
        at least 4 cores, in-process below; 1 = in-process).
        Data sets smaller than 5,000 points are always solved in-process.  Inside
        ``with joblib.parallel_backend("dask"):`` (a ``distributed.Client`` created before),
        any ``n_jobs`` other than 1 runs the sub-problems of every level on that dask
        cluster instead of a local pool (the data scattered to the workers once per fit;
        ``docs/dask.md``).
    random_state : int, RandomState instance or None
        Seeds the k-means samples and initialisations (and the calibration split).
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
    n_features_in_ : int
    kernel_spec_ : KernelSpec
        The kernel used (with ``gamma`` resolved and ``offset = bias**2``).
    support_ : ndarray of shape (n_sv,), int64
        Training indices of the support vectors (exact model).
    support_vectors_ : ndarray or CSR matrix of shape (n_sv, n_features)
        Exact model only.
    dual_coef_ : ndarray of shape (n_problems, n_sv), float64
        ``alpha_j y_j`` per binary problem (1 problem for 2 classes, else one per class).
    intercept_ : ndarray of shape (n_problems,), float64
        ``bias**2 * sum_j alpha_j y_j`` (already part of the kernel expansion).
    early_models_ : list of EarlyModel or None
        Early-prediction models (one per problem) when ``early_level`` is set.
    dual_objective_ : ndarray of shape (n_problems,)
        Dual objective of each problem (exact model: global problem; early model: sum of
        the level's sub-problem objectives).
    n_iter_ : ndarray of shape (n_problems,), int64
        Coordinate updates over all stages, per problem.
    fit_history_ : list of list of dict
        Per problem, one record per DC-SVM stage (seconds, SVs, objective ...).
    calibrator_ : MarginCalibrator or None
        The probability calibration (None when fitted with ``probability=False``).
    calibration_ : {"held-out", "held-out-refit", "in-sample"} or None
        How ``calibrator_`` was fitted: on held-out rows (model trained on the rest), on
        held-out rows of a first fit with the model refitted on all rows, or in-sample.

    Notes
    -----
    ``fit`` accepts the keyword arguments ``progress``, ``should_stop`` and ``executor``
    of :func:`svmstream.solvers.exact._dcsvm.dcsvm_fit` (for a job runner).

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers import DCSVMClassifier
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> clf = DCSVMClassifier(C=10.0, gamma=2.0, n_jobs=1).fit(X[:300], y[:300])
    >>> round(clf.score(X[300:], y[300:]), 2)
    0.97
    """

    def __init__(
        self,
        C=1.0,
        kernel="rbf",
        gamma="scale",
        degree=3,
        coef0=0.0,
        bias=1.0,
        k=4,
        n_levels=4,
        min_level=1,
        n_sample=1000,
        tol=1e-3,
        level_tol=None,
        cache_size=200.0,
        shrinking=True,
        refine=True,
        early_level=None,
        max_iter=None,
        n_jobs=None,
        random_state=None,
        probability=False,
    ):
        self.C = C
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.bias = bias
        self.k = k
        self.n_levels = n_levels
        self.min_level = min_level
        self.n_sample = n_sample
        self.tol = tol
        self.level_tol = level_tol
        self.cache_size = cache_size
        self.shrinking = shrinking
        self.refine = refine
        self.early_level = early_level
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.probability = probability

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------ validation
    def check_params(self):
        """Validate the parameters; returns self.

        Raises
        ------
        ValueError
            Naming the first invalid parameter.
        """
        if not (isinstance(self.C, numbers.Real) and self.C > 0):
            raise ValueError(f"C must be a positive number, got {self.C!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be 'rbf', 'poly' or 'linear', got {self.kernel!r}")
        if not (isinstance(self.gamma, str) and self.gamma in ("scale", "auto")) and not (
            isinstance(self.gamma, numbers.Real) and self.gamma > 0
        ):
            raise ValueError(f"gamma must be 'scale', 'auto' or a positive number, got {self.gamma!r}")
        if not (isinstance(self.bias, numbers.Real) and self.bias >= 0):
            raise ValueError(f"bias must be a number >= 0, got {self.bias!r}")
        if not (isinstance(self.tol, numbers.Real) and self.tol > 0):
            raise ValueError(f"tol must be > 0, got {self.tol!r}")
        if not (isinstance(self.k, numbers.Integral) and self.k >= 2):
            raise ValueError(f"k must be an integer >= 2, got {self.k!r}")
        if not (isinstance(self.n_levels, numbers.Integral) and self.n_levels >= 0):
            raise ValueError(f"n_levels must be an integer >= 0, got {self.n_levels!r}")
        if not (isinstance(self.min_level, numbers.Integral) and self.min_level >= 1):
            raise ValueError(f"min_level must be an integer >= 1, got {self.min_level!r}")
        if self.early_level is not None and not (
            isinstance(self.early_level, numbers.Integral) and 1 <= self.early_level <= self.n_levels
        ):
            raise ValueError(f"early_level must be None or in [1, n_levels], got {self.early_level!r}")
        if not (isinstance(self.cache_size, numbers.Real) and self.cache_size > 0):
            raise ValueError(f"cache_size must be > 0 (MB), got {self.cache_size!r}")
        if not isinstance(self.probability, (bool, np.bool_)):
            raise ValueError(f"probability must be a bool, got {self.probability!r}")
        return self

    def _resolve_gamma(self, X) -> float:
        if isinstance(self.gamma, str):
            if self.gamma == "auto":
                return 1.0 / X.shape[1]
            if sp.issparse(X):
                mean = X.mean()
                var = X.multiply(X).mean() - mean * mean
            else:
                var = X.var()
            return 1.0 / (X.shape[1] * var) if var > 0 else 1.0
        return float(self.gamma)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, *, progress=None, should_stop=None, executor=None):
        """Train one DC-SVM per binary problem.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        progress, should_stop : callables, optional
            See :func:`svmstream.solvers.exact._dcsvm.dcsvm_fit`; progress dicts also carry ``problem`` and
            ``n_problems``.
        executor : concurrent.futures.Executor, optional
            Runs level sub-problems; default a process pool (see ``n_jobs``).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On invalid parameters or data, or fewer than two classes.
        svmstream.solvers.Cancelled
            When ``should_stop()`` returned True.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        classes, y_idx = np.unique(y, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(
                f"DCSVMClassifier needs samples of at least 2 classes; got {classes.shape[0]} class"
            )
        self.classes_ = classes
        gamma = self._resolve_gamma(X)  # from all rows: the same kernel as probability=False
        spec = KernelSpec(self.kernel, gamma, float(self.coef0), int(self.degree), float(self.bias) ** 2)
        self.calibrator_ = self.calibration_ = None
        split = holdout_split(y_idx, classes.shape[0], self.random_state) if self.probability else None
        if split is not None:
            # calibrate a model of the training part on the held-out rows
            self._train(X, y_idx, spec, split[0], progress, should_stop, executor)
            self._calibrate(X[split[1]], y_idx[split[1]])
            self.calibration_ = "held-out"
            if X.shape[0] < REFIT_BELOW_ROWS:
                # small data: the served model is fitted on all rows (as with probability=False)
                self._train(X, y_idx, spec, None, progress, should_stop, executor)
                self.calibration_ = "held-out-refit"
            return self
        self._train(X, y_idx, spec, None, progress, should_stop, executor)
        if self.probability:
            self._calibrate(X, y_idx)
            self.calibration_ = "in-sample"
        return self

    def _calibrate(self, X, y_idx):
        """Fit ``calibrator_`` on the current model's decision values of validated rows."""
        # _decision, not decision_function: X is validated (and has no feature names to check)
        self.calibrator_ = MarginCalibrator(self.classes_.shape[0]).fit(self._decision(X), y_idx)

    def _train(self, X, y_idx, spec, rows, progress, should_stop, executor):
        """Solve the binary problems on ``X[rows]`` (all rows if None) and set the model's
        attributes; ``support_`` indexes ``X``."""
        if rows is not None:
            X, y_idx = X[rows], y_idx[rows]
        kd = KernelData(X)
        results = self._solve_problems(kd, y_idx, spec, progress, should_stop, executor)
        self._set_model(results, kd, X, spec, rows)

    def _solve_problems(self, kd, y_idx, spec, progress, should_stop, executor):
        """One binary DC-SVM per problem (class 1 for binary, one-vs-rest otherwise), through
        the caller's executor, a joblib dask cluster or a pool made here: ``[(result, ±1)]``."""
        classes = self.classes_
        n = kd.n_samples
        problems = [1] if classes.shape[0] == 2 else list(range(classes.shape[0]))
        seed = (
            np.random.RandomState(self.random_state)
            if not isinstance(self.random_state, np.random.RandomState)
            else self.random_state
        )
        seeds = seed.randint(0, 2**31 - 1, size=len(problems))
        own_pool, stop_flag = None, None
        workers = default_workers() if self.n_jobs is None else int(self.n_jobs)
        # scikit-learn's convention: the joblib backend the caller chose decides where
        # n_jobs work runs; joblib's dask backend means the sub-problems go to its cluster
        client = active_client() if executor is None and self.n_jobs != 1 else None
        if client is None and executor is None and workers > 1 and n >= 5000 and self.n_levels > 0:
            own_pool, stop_flag = make_process_pool(workers, DEFAULT_START_METHOD)
            executor = own_pool
        place = {"executor": executor, "stop_flag": stop_flag, "client": client}
        place["n_jobs"] = 1 if executor is None else None
        results = []
        try:
            for p, cls in enumerate(problems):
                yb = np.where(y_idx == cls, 1.0, -1.0)
                prog = (
                    None
                    if progress is None
                    else (lambda d, p=p: progress({**d, "problem": p, "n_problems": len(problems)}))
                )
                res = dcsvm_fit(
                    kd, yb, spec, float(self.C), **self._fit_settings(), **place,
                    random_state=int(seeds[p]), progress=prog, should_stop=should_stop,
                )  # fmt: skip
                results.append((res, yb))
        finally:
            if own_pool is not None:
                own_pool.shutdown(wait=True, cancel_futures=True)
        return results

    def _fit_settings(self):
        """This estimator's parameters as :func:`._dcsvm.dcsvm_fit` takes them."""
        return {
            "k": int(self.k),
            "n_levels": int(self.n_levels),
            "min_level": int(self.min_level),
            "n_sample": int(self.n_sample),
            "eps": float(self.tol),
            "level_eps": None if self.level_tol is None else float(self.level_tol),
            "cache_mb": float(self.cache_size),
            "shrinking": bool(self.shrinking),
            "refine": bool(self.refine),
            "early_levels": () if self.early_level is None else (int(self.early_level),),
            "stop_level": self.early_level,
            "max_iter": self.max_iter,
        }

    def _set_model(self, results, kd, X, spec, rows):
        """The fitted attributes from the problems' results (the exact model, or the
        early-prediction models of ``early_level``)."""
        self.kernel_spec_ = spec
        self.dual_objective_ = np.array([r.objective for r, _ in results])
        self.fit_history_ = [r.history for r, _ in results]
        self.n_iter_ = np.array(
            [max(1, sum(int(h.get("iterations", 0)) for h in r.history)) for r, _ in results], dtype=np.int64
        )
        self._sparse_fit = bool(kd.is_sparse)
        if self.early_level is not None:
            self.early_models_ = [r.early[int(self.early_level)] for r, _ in results]
            self.intercept_ = np.array([spec.offset * m.coef.sum() for m in self.early_models_])
            self.support_ = np.zeros(0, dtype=np.int64)
            self.dual_coef_ = np.zeros((len(results), 0))
            self.support_vectors_ = None
        else:
            self.early_models_ = None
            alphas = np.stack([r.alpha for r, _ in results])
            ys = np.stack([yb for _, yb in results])
            support = np.flatnonzero(np.any(alphas > 0, axis=0))
            # indices of the rows passed to fit (also when trained on a calibration split's rest)
            self.support_ = (support if rows is None else rows[support]).astype(np.int64)
            self.dual_coef_ = np.ascontiguousarray((alphas * ys)[:, support])
            self.intercept_ = spec.offset * self.dual_coef_.sum(axis=1)
            self.support_vectors_ = X[support]
            self._sv_kd = kd.take(support)

    # ------------------------------------------------------------------ predict
    def decision_function(self, X):
        """Decision values.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (positive = ``classes_[1]``), else
        (n_samples, n_classes) one-vs-rest scores; float64.
        """
        check_is_fitted(self)
        return self._decision(validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False))

    def _decision(self, X):
        """:meth:`decision_function` of validated rows (float64 ndarray or CSR)."""
        kd = KernelData(X)
        if self.early_models_ is not None:
            scores = np.stack(
                [m.decision_function(kd, self.kernel_spec_) for m in self.early_models_], axis=1
            )
        else:
            scores = kernel_matvec(kd, self._sv_kd, self.kernel_spec_, self.dual_coef_.T)
            if scores.ndim == 1:
                scores = scores[:, None]
        return scores[:, 0] if self.classes_.shape[0] == 2 else scores

    def predict(self, X):
        """Predicted class labels, shape (n_samples,)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.int64)]
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
        X : array-like or sparse matrix of shape (n_samples, n_features)

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
        check_is_fitted(self)
        if getattr(self, "calibrator_", None) is None:
            raise NotFittedError(
                "predict_proba needs a model fitted with probability=True; this one was fitted without"
            )
        return self.calibrator_.predict_proba(self.decision_function(X))
