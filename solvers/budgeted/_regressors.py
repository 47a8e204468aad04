"""Budgeted kernel regression: BSGD with the ε-insensitive loss, and the dual coordinate step.

:class:`BudgetedSGDRegressor` is the classifier's BSGD (Wang, Crammer & Vucetic 2012,
Algorithm 1) with the loss of ε-SVR, ``max(0, |y − f(x)| − ε)`` (Kivinen, Smola & Williamson
2004, §III-C; on a budget: Le et al. 2017); :class:`BudgetedSCARegressor` is BSCA's dual
coordinate ascent (Qaadan, Schüler & Glasmachers 2019) on the bias-free ε-SVR dual.  Both keep
at most ``budget`` support vectors; merging pairs coefficients of the same sign, so the two
signs of a regression model are merged apart (:func:`._merging.merge_smallest`).

The numba kernels are :func:`._task_steps.svr_sgd_steps` and :func:`._task_steps.svr_sca_steps`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from .._hyperparameters import DEFAULT_EPSILON, SCHEDULES
from ..persistence import register_estimator
from ._gss import GSS_STANDARD_EPS
from ._task_base import BudgetedTaskModel, constraints, regularisation, writable
from ._task_rehearsal import svr_sca_stream
from ._task_steps import svr_sca_steps, svr_sgd_steps
from ._weights import checked_weights, unit_weights


class _Regressor(RegressorMixin, BudgetedTaskModel):
    def _targets(self, X, y, reset):
        X, y = validate_data(self, X, y, reset=reset, dtype=np.float64, order="C", y_numeric=True)
        return writable(X), writable(np.asarray(y, dtype=np.float64).ravel())

    def fit(self, X, y):
        """Learn ``epochs`` passes over X (n, d) float64 and targets y (n,) float64, each in a
        random permutation (``random_state``); returns self.  ValueError on NaN/inf, a string
        target or a bad parameter."""
        self._validate_params()
        X, y = self._targets(X, y, reset=True)
        self._start(X, reset=True)
        self._prepare(n_rows=X.shape[0])
        rng = check_random_state(self.random_state)
        for _ in range(self.epochs):
            self._steps(X, y, rng.permutation(X.shape[0]).astype(np.int64), dataset=True)
        return self

    def partial_fit(self, X, y, sample_weight=None):
        """One step per row of X (n, d), in the given order (a stream: λ from ``n_samples`` or
        30,000); returns self.  ``sample_weight`` (n,) finite numbers >= 0 or None (ones): each
        row's importance weight (``docs/weights.md``; w = 0 takes no step).  Raises ValueError on
        bad input (a bad weight naming ``sample_weight[i]``); the model is unchanged then."""
        first = not hasattr(self, "_sv_t")
        if first:
            self._validate_params()
        X, y = self._targets(X, y, reset=first)
        weights = checked_weights(sample_weight, X.shape[0])
        self._start(X, reset=first)
        if first:
            self._prepare(n_rows=None)
        order = np.arange(X.shape[0], dtype=np.int64)
        self.last_predictions_ = self._steps(X, y, order, dataset=False, weights=weights)
        return self

    def predict(self, X):
        """f(x) for the rows of X (n, d): (n,) float64."""
        return self._raw_decision(X)


@register_estimator
class BudgetedSGDRegressor(_Regressor):
    """Budgeted SGD kernel regression (BSGD with the ε-insensitive loss).

    Minimises ``λ/2‖w‖² + (1/n)Σ max(0, |y_i − f(x_i)| − ε)`` with ``f(x) = ⟨w, φ(x)⟩ + b``,
    the Gaussian kernel and at most ``budget`` support vectors; with λ = 1/(C·n) that is the
    ε-SVR primal ``½‖w‖² + C·Σ max(0, |y − f| − ε)`` divided by C·n.  Sources: Wang, Crammer &
    Vucetic (2012), Algorithm 1, Table 2, §6; Kivinen, Smola & Williamson (2004), §III-C;
    Smola & Schölkopf (2004), eq. (3).  No hidden scaling: X and y are learned as given (scale
    them, e.g. ``TransformedTargetRegressor(make_pipeline(StandardScaler(), est),
    transformer=StandardScaler())``, or use the streaming pipeline).

    Parameters
    ----------
    budget : int >= 2, default=500
        Maximal number of support vectors B.
    gamma : float > 0 or "scale", default="scale"
        RBF width; "scale": 1/(d·Var(X)) of the first data seen (``gamma_``).
    C : float in (0, 1e10], default=1.0
        λ = 1/(C·n) unless ``lambda_`` is given (n: ``n_samples``, the rows of ``fit``, or
        30,000 for a stream).
    lambda_ : float >= 1e-12 or None, default=None
    n_samples : int >= 1 or None, default=None
    epsilon : float >= 0, default=0.1
        Half-width of the ε-tube, in units of y.
    epochs : int >= 1, default=1
        Passes of :meth:`fit`, each a random permutation.
    maintenance : {"merge", "remove", "project"}, default="merge"
    merge_solver : {"gss", "gss-precise", "lookup-h", "lookup-wd"}, default="gss"
    schedule : {"pegasos", "norma", "constant"}, default="pegasos"
        η_t = 1/(λt), eta/√t, or eta (the perceptron's ball has no meaning here).
    eta : float > 0, default=1.0
    fit_intercept : bool, default=False
        Learn an unregularised b with the rate η_t.
    gss_eps : float in (0, 1), default=0.01
    random_state : int, RandomState or None, default=None
        Seed of ``fit``'s permutations.

    Attributes
    ----------
    n_features_in_ : int; gamma_ : float; lambda_eff_ : float; intercept_ : float;
    support_vectors_ : (n_sv, d) float64; dual_coef_ : (n_sv,) float64 effective coefficients;
    last_predictions_ : (n,) float64 — f(x) of each row of the last ``partial_fit`` before its step.

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.budgeted.tasks import BudgetedSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (400, 1)); y = np.sin(2 * X[:, 0])
    >>> est = BudgetedSGDRegressor(budget=30, C=1, epochs=20, random_state=0).fit(X, y)
    >>> est.n_support_ <= 30, bool(np.sqrt(np.mean((est.predict(X) - y) ** 2)) < 0.25)
    (True, True)
    """

    _parameter_constraints: dict = constraints(
        "budget", "gamma", "C", "lambda_", "n_samples", "epsilon", "epochs", "maintenance", "merge_solver",
        "schedule", "eta", "fit_intercept", "gss_eps", "random_state",
    )  # fmt: skip
    _parameter_constraints["schedule"] = [
        type(_parameter_constraints["schedule"][0])({"pegasos", "norma", "constant"})
    ]

    def __init__(
        self, *, budget=500, gamma="scale", C=1.0, lambda_=None, n_samples=None, epsilon=DEFAULT_EPSILON,
        epochs=1, maintenance="merge", merge_solver="gss", schedule="pegasos", eta=1.0,
        fit_intercept=False, gss_eps=GSS_STANDARD_EPS, random_state=None,
    ):  # fmt: skip
        self.budget = budget
        self.gamma = gamma
        self.C = C
        self.lambda_ = lambda_
        self.n_samples = n_samples
        self.epsilon = epsilon
        self.epochs = epochs
        self.maintenance = maintenance
        self.merge_solver = merge_solver
        self.schedule = schedule
        self.eta = eta
        self.fit_intercept = fit_intercept
        self.gss_eps = gss_eps
        self.random_state = random_state

    def _prepare(self, n_rows):
        self.lambda_eff_ = regularisation(self.lambda_, self.C, self.n_samples, n_rows)

    def _steps(self, X, y, order, dataset, weights=None):
        out = np.empty(order.shape[0])
        weights = unit_weights(y.shape[0]) if weights is None else weights
        svr_sgd_steps(
            X, y, weights, order, self._sv_t, self._sv_sq, self._coef, self._bias, self._counters, self._reals,
            self._k_inv, self.gamma_, self.lambda_eff_, float(self.eta), float(self.epsilon),
            int(self.budget), SCHEDULES[self.schedule], self._maintenance(), bool(self.fit_intercept),
            out, self._scratch(),
        )  # fmt: skip
        return out

    @property
    def intercept_(self) -> float:
        return float(self._bias[0])

    def stream_steps(self, X, y, weights, memory, rehearsal, draws, out, min_delta=0.0):
        """The streaming pipeline's call: one step per row of X (scaled) in order with its
        weight, f before each in ``out``; rehearsal is not offered for BSGD (ValueError if asked)."""
        if rehearsal:
            raise ValueError("rehearsal needs the dual coordinate regressor (BudgetedSCARegressor)")
        if not hasattr(self, "lambda_eff_"):
            self._prepare(n_rows=None)
        out[:] = self._steps(X, y, np.arange(X.shape[0], dtype=np.int64), dataset=False, weights=weights)

    def get_state(self):
        arrays, meta = super().get_state()
        meta["lambda_eff"] = self.lambda_eff_
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        est = super().from_state(arrays, meta)
        est.lambda_eff_ = float(meta["lambda_eff"])
        return est


@register_estimator
class BudgetedSCARegressor(_Regressor):
    """Budgeted dual coordinate ascent for the bias-free ε-SVR (BSCA's step, ε-insensitive).

    Solves ``min_α ½αᵀKα − yᵀα + ε‖α‖₁`` s.t. ``−C ≤ α_i ≤ C`` — the dual of
    ``½‖w‖² + C·Σ max(0, |y_i − f(x_i)| − ε)``, ``f(x) = Σ_j α_j k(x_j, x)`` (Smola & Schölkopf
    2004, eq. 12, without the bias's equality constraint) — one exact coordinate minimisation
    per visit (:func:`._task_steps.soft_box`), the model kept within ``budget`` SVs by the
    classifier's maintenance (Qaadan, Schüler & Glasmachers 2019, Algorithm 2).  :meth:`fit`
    visits the rows in ``epochs`` random permutations; :meth:`partial_fit` visits each row once
    with α = 0 (the kernel passive-aggressive regressor PA-I, Crammer et al. 2006, §5).  C is the
    batch ε-SVR's C on a stream of any length.

    Parameters
    ----------
    budget : int >= 2, default=500
    gamma : float > 0 or "scale", default="scale"
    C : float in (0, 1e10], default=1.0
        Box constraint of every dual coefficient.
    epsilon : float >= 0, default=0.1
    epochs : int >= 1, default=1
    maintenance : {"merge", "remove", "project"}, default="merge"
    merge_solver : {"gss", "gss-precise", "lookup-h", "lookup-wd"}, default="gss"
    gss_eps : float in (0, 1), default=0.01
    random_state : int, RandomState or None, default=None

    Attributes
    ----------
    n_features_in_, gamma_, support_vectors_, dual_coef_, last_predictions_ : as
    :class:`BudgetedSGDRegressor`; alpha_ : (n,) float64, the dual variables after :meth:`fit`.

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.budgeted.tasks import BudgetedSCARegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (400, 1)); y = np.sin(2 * X[:, 0])
    >>> est = BudgetedSCARegressor(budget=30, C=10, epochs=5, random_state=0).fit(X, y)
    >>> est.n_support_ <= 30, bool(np.sqrt(np.mean((est.predict(X) - y) ** 2)) < 0.25)
    (True, True)
    """

    #: The dual engine learns a sorted stream far better with growing scales (diamonds by price:
    #: RMSE 2.08 -> 1.08 x SVR); BSGD's steps do not (3,085 -> 8,822 on the same stream).
    SCALES_GROW = True

    _parameter_constraints: dict = constraints(
        "budget", "gamma", "C", "epsilon", "epochs", "maintenance", "merge_solver", "gss_eps", "random_state"
    )

    def __init__(
        self, *, budget=500, gamma="scale", C=1.0, epsilon=DEFAULT_EPSILON, epochs=1, maintenance="merge",
        merge_solver="gss", gss_eps=GSS_STANDARD_EPS, random_state=None,
    ):  # fmt: skip
        self.budget = budget
        self.gamma = gamma
        self.C = C
        self.epsilon = epsilon
        self.epochs = epochs
        self.maintenance = maintenance
        self.merge_solver = merge_solver
        self.gss_eps = gss_eps
        self.random_state = random_state

    def _prepare(self, n_rows):
        self.alpha_ = np.zeros(n_rows if n_rows is not None else 0)

    def _steps(self, X, y, order, dataset, weights=None):
        out = np.empty(order.shape[0])
        alpha = self.alpha_ if dataset else np.zeros(0)
        weights = unit_weights(y.shape[0]) if weights is None else weights
        svr_sca_steps(
            X, y, weights, order, alpha, not dataset, float(self.C), float(self.epsilon), self._sv_t, self._sv_sq,
            self._coef, self._counters, self._reals, self._k_inv, self.gamma_, int(self.budget),
            self._maintenance(), out, self._scratch(), 0.0,
        )  # fmt: skip
        return out

    @property
    def intercept_(self) -> float:
        return 0.0

    def stream_steps(self, X, y, weights, memory, rehearsal, draws, out, min_delta=0.0):
        """The streaming pipeline's call (:func:`._task_rehearsal.svr_sca_stream`): one
        streaming step per row of X (scaled) in order with its weight (n,), each followed by its
        reservoir offer and ``rehearsal`` dataset-mode steps on reservoir rows; f before each
        own step in ``out``.  ``memory`` = (mem_X (M, d), mem_y (M,), mem_a (M,), mem_n (2,)
        int64, mem_w (M,), mem_s (M,) the rows' latest out-of-sample residuals); ``draws``
        (n·(1 + rehearsal),) uniforms; ``min_delta``: a rehearsal step of |δ| not above it is skipped."""
        mem_X, mem_y, mem_a, mem_n, mem_w, mem_s = memory
        svr_sca_stream(
            X, y, weights, float(self.C), float(self.epsilon), self._sv_t, self._sv_sq, self._coef, self._counters,
            self._reals, self._k_inv, self.gamma_, int(self.budget), self._maintenance(), self._scratch(),
            mem_X, mem_y, mem_a, mem_n, mem_w, mem_s, int(rehearsal), draws, out, float(min_delta),
        )  # fmt: skip
