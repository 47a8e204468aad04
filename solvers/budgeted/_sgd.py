"""BSGD: budgeted SGD kernel SVM (Wang, Crammer & Vucetic 2012), and what it shares with
Pegasos (:mod:`._pegasos`): the learning-rate schedule's parameters and their checks."""

from __future__ import annotations

import numpy as np

from .._params import SCHEDULES, check_choice, check_positive, keep_params, parameter_constraints
from ..persistence import register_estimator
from ._base import BudgetedKernelModel
from ._bsgd import bsgd_steps
from ._gss import GSS_STANDARD_EPS
from ._sparse_pool import run_with_room

#: The schedule's parameters (BSGD and Pegasos).
SCHEDULE_PARAMS = ("schedule", "eta", "radius", "fit_intercept")
#: The budgeted kernel model's parameters (BSGD and BSCA).
KERNEL_PARAMS = (
    "budget",
    "gamma",
    "C",
    "lambda_",
    "n_samples",
    "epochs",
    "maintenance",
    "merge_solver",
    "gss_eps",
    "compare_merge_solver",
    "profile",
    "random_state",
    "sv_storage",
)


class ScheduleChecks:
    """The schedule's checks and its radius (a mixin of BSGD and Pegasos)."""

    def _check_schedule_params(self):
        check_positive("eta", self.eta)
        check_positive("radius", self.radius, allow_none=True)
        check_choice("schedule", self.schedule, SCHEDULES)

    def _radius(self):
        """U of the perceptron's ball: ``radius``, default 1/√λ."""
        return self.radius if self.radius is not None else 1.0 / np.sqrt(self.lambda_eff_)


@register_estimator
class BudgetedSGDClassifier(ScheduleChecks, BudgetedKernelModel):
    """Budgeted SGD kernel SVM (BSGD): binary, or multi-class by Crammer–Singer.

    Source: Wang, Crammer & Vucetic (2012), Algorithm 1 and §5 (multi-class), the learning-rate
    schedules of Table 2 and the budget maintenance of §6; merging by golden section search or
    the lookup tables of Glasmachers & Qaadan (2018).  The model never holds more than
    ``budget`` support vectors.  It learns from the features as given (no hidden scaling):
    k(x, x') = exp(−γ‖x − x'‖²) on the rows passed to :meth:`fit` / :meth:`partial_fit`.

    Parameters
    ----------
    budget : int >= 2, default=500
        Maximal number of support vectors B.
    gamma : float > 0 or "scale", default="scale"
        Gaussian kernel width γ.  ``"scale"``: 1 / (d · Var(X)) over all entries of the
        first data seen (:meth:`fit`'s X, or the first :meth:`partial_fit` batch), as
        scikit-learn's ``SVC(gamma="scale")``; ``gamma_`` holds the value.
    C : float in (0, 1e10], default=1.0
        SVM cost; λ = 1/(n·C) when ``lambda_`` is None, n = ``n_samples``, else the rows of
        :meth:`fit`, else 30,000 for a stream (``partial_fit``).
    lambda_ : float >= 1e-12 or None, default=None
        Regularisation λ; overrides ``C``.
    n_samples : int >= 1 or None, default=None
        n in λ = 1/(n·C).
    epochs : int >= 1, default=1
        Passes over randomly permuted rows in :meth:`fit`.
    maintenance : {"merge", "remove", "project"}, default="merge"
        Budget maintenance (§6): merge two SVs, remove the smallest ‖α_p‖², or project it.
    merge_solver : {"gss", "gss-precise", "lookup-h", "lookup-wd"}, default="gss"
        How merging finds h and the partner.  Multi-class merging runs GSS.
    schedule : {"pegasos", "norma", "perceptron", "constant"}, default="pegasos"
        η_t = 1/(λt); η_t = eta/√t; the margin perceptron; or a fixed η_t = eta.
    eta : float > 0, default=1.0
        Base learning rate of Norma, the perceptron and the constant schedule.
    radius : float > 0 or None, default=None
        U of the perceptron's ball; default 1/√λ.
    fit_intercept : bool, default=False
        Learn an unregularised bias b with the same rate η_t.
    gss_eps : float in (0, 1), default=0.01
        Golden section search tolerance of GSS-standard.
    compare_merge_solver : str or None, default=None
        Diagnostics: also run this solver's partner search at every merge (not applied).
    profile : bool, default=False
        Measure the wall time of budget maintenance (``maintenance_seconds_``).
    random_state : int, RandomState or None, default=None
        Seed of the epoch permutations.
    sv_storage : {"auto", "dense", "sparse"}, default="auto"
        Storage of the SVs: ``"auto"`` is sparse for wide (d > 256), at most 10% nonzero CSR
        input, dense otherwise; decisions are the same either way.

    Attributes
    ----------
    classes_ : (n_classes,) ndarray; n_features_in_ : int; gamma_ : float; lambda_eff_ : float
    support_vectors_ : (n_sv, d) float64; dual_coef_ : effective α; intercept_ : (K,) float64
    n_support_vectors_, t_ : int — support vectors held, steps taken
    last_margins_ : f(x) before each step of the last call, (n,) or (n, K) float64

    Raises
    ------
    ValueError
        On an invalid parameter (naming it), non-finite input or an unknown label.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from svmstream.solvers import BudgetedSGDClassifier
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> clf = BudgetedSGDClassifier(budget=50, gamma=1.0, C=10.0, epochs=3, random_state=0)
    >>> clf = clf.fit(X[:300], y[:300])
    >>> clf.n_support_vectors_ <= 50, round(clf.score(X[300:], y[300:]), 2)
    (True, 0.96)
    >>> scaled = make_pipeline(StandardScaler(), BudgetedSGDClassifier(budget=50, random_state=0))
    >>> round(scaled.fit(X[:300], y[:300]).score(X[300:], y[300:]), 2)
    0.93
    """

    _parameter_constraints: dict = parameter_constraints(KERNEL_PARAMS + SCHEDULE_PARAMS)
    #: the kernel (Pegasos, :class:`._pegasos.PegasosClassifier`, is the linear model)
    kernel = "rbf"

    def __init__(
        self, *, budget=500, gamma="scale", C=1.0, lambda_=None, n_samples=None, epochs=1, maintenance="merge",
        merge_solver="gss", schedule="pegasos", eta=1.0, radius=None, fit_intercept=False,
        gss_eps=GSS_STANDARD_EPS, compare_merge_solver=None, profile=False, random_state=None,
        sv_storage="auto",
    ):  # fmt: skip
        keep_params(self, locals())

    def check_params(self):
        """Validate the parameters (the family's checks, then ``_parameter_constraints``);
        returns self.

        Raises
        ------
        ValueError
            Naming the first invalid parameter, e.g. ``budget must be an integer >= 2, got 1``.
        """
        self._check_budget_params()
        self._check_schedule_params()
        self._validate_params()
        return self

    @property
    def coef_(self):
        """A kernel model has no weight vector: AttributeError, naming the linear model."""
        raise AttributeError("coef_ exists for linear models only (PegasosClassifier)")

    def _apply(self, X, labels, weights, order, margins):
        """BSGD steps over ``X[order]``: dense X (n, d), or CSR arrays for sparse SVs;
        ``weights`` (n,) float64 importance weights."""
        maintenance, scratch = self._maintenance_config(), self._scratch()

        def step(order_part, margins_part, pool):
            return self._bsgd_call(X, labels, weights, order_part, pool, maintenance, scratch, margins_part)

        if self._sparse_svs():
            run_with_room(step, X, order, margins, self)
        else:
            step(order, margins, self._sv_t)

    def _bsgd_call(self, X, labels, weights, order, pool, maintenance, scratch, margins):
        radius = self._radius()
        return bsgd_steps(
            X,
            labels,
            weights,
            order,
            pool,
            self._sv_sq,
            self._coef,
            self._bias,
            self._counters,
            self._reals,
            self._k_inv,
            self.gamma_,
            self.lambda_eff_,
            float(self.eta),
            float(radius),
            int(self.budget),
            SCHEDULES[self.schedule],
            maintenance,
            bool(self.fit_intercept),
            bool(self.profile),
            margins,
            self._f_buf,
            scratch,
        )
