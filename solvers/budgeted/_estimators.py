"""The plain budgeted estimators: the papers' algorithms with the papers' parameters.

:class:`BudgetedSGDClassifier` (BSGD), :class:`BudgetedSCAClassifier` (BSCA) and
:class:`PegasosClassifier` (the online linear SVM) learn from the features they are given, in
the order they are given: no scaling, no warm-up window, no shuffle buffer, no run guard, no
rehearsal and no reaction to drift.  Those are the stages of the streaming pipeline
(:class:`svmstream.solvers.online.StreamingClassifier`) that the service composes around
these estimators; a scikit-learn user scales with ``make_pipeline(StandardScaler(), ...)``.

Each is the engine of its family (:class:`._classes.StreamingBSGD`,
:class:`._classes.StreamingBSCA`), which has no stages either: the same code runs, so a plain
estimator's decisions are the engine's, bit for bit (``tests/test_plain_estimators.py``).
"""

from __future__ import annotations

from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from .._params import (
    BUDGET_MIN,
    C_MAX,
    GAMMA_MAX,
    GAMMA_MIN,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    SAMPLINGS,
    SCHEDULES,
    SV_STORAGES,
)
from ..persistence import register_estimator
from ._base import LEGACY_STAGE_PARAMS, PIPELINE_PARAMS
from ._classes import StreamingBSCA, StreamingBSGD
from ._gss import GSS_STANDARD_EPS


class _Plain:
    """What a plain face fixes of its engine (``ENGINE_FIXED``) and its parameter checks."""

    #: the stages' settings a plain estimator's saved state may hold (off)
    _STAGES_OFF = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}
    #: class attributes that are engine parameters (the engine of the family reads them)
    ENGINE_FIXED: tuple = ()

    def engine_params(self):
        """The engine's parameters: ``get_params()`` and the settings this face fixes
        (``ENGINE_FIXED``)."""
        params = super().engine_params()
        params.update({name: getattr(self, name) for name in self.ENGINE_FIXED})
        return params

    @classmethod
    def from_params(cls, params):
        """Saved parameters → estimator; the stages' settings of a saved plain estimator are
        its fixed ones and are dropped (ValueError if a saved one differs: that state belongs
        to a streaming pipeline)."""
        params = {k: v for k, v in params.items() if k not in PIPELINE_PARAMS}  # the pipeline's
        for name in LEGACY_STAGE_PARAMS:
            if name in params and params.pop(name) != cls._STAGES_OFF[name]:
                raise ValueError(f"a {cls.__name__} has no {name}; load this state as a StreamingClassifier")
        return cls(**params)

    def check_params(self):
        """Validate the parameters (the family's own checks, then ``_parameter_constraints``);
        returns self.  Raises ValueError (scikit-learn's ``InvalidParameterError``) naming the
        parameter."""
        super().check_params()  # the family's messages first ("budget must be an integer >= 2, ...")
        self._validate_params()
        return self


_GAMMA = [Interval(Real, GAMMA_MIN, GAMMA_MAX, closed="both"), StrOptions({"scale"})]
_KERNEL_COMMON = {
    "budget": [Interval(Integral, BUDGET_MIN, None, closed="left")],
    "gamma": _GAMMA,
    "C": [Interval(Real, 0, C_MAX, closed="right")],
    "lambda_": [Interval(Real, LAMBDA_MIN, None, closed="left"), None],
    "n_samples": [Interval(Integral, 1, None, closed="left"), None],
    "epochs": [Interval(Integral, 1, None, closed="left")],
    "maintenance": [StrOptions(set(MAINTENANCE))],
    "merge_solver": [StrOptions(set(MERGE_SOLVERS))],
    "gss_eps": [Interval(Real, 0, 1, closed="neither")],
    "compare_merge_solver": [StrOptions(set(MERGE_SOLVERS)), None],
    "profile": ["boolean"],
    "random_state": ["random_state"],
    "sv_storage": [StrOptions(set(SV_STORAGES))],
}
_SCHEDULE = {
    "schedule": [StrOptions(set(SCHEDULES))],
    "eta": [Interval(Real, 0, None, closed="neither")],
    "radius": [Interval(Real, 0, None, closed="neither"), None],
    "fit_intercept": ["boolean"],
}


@register_estimator
class BudgetedSGDClassifier(_Plain, StreamingBSGD):
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

    _parameter_constraints: dict = {**_KERNEL_COMMON, **_SCHEDULE}
    kernel = "rbf"
    ENGINE = StreamingBSGD
    ENGINE_FIXED = ("kernel",)

    def __init__(
        self,
        *,
        budget=500,
        gamma="scale",
        C=1.0,
        lambda_=None,
        n_samples=None,
        epochs=1,
        maintenance="merge",
        merge_solver="gss",
        schedule="pegasos",
        eta=1.0,
        radius=None,
        fit_intercept=False,
        gss_eps=GSS_STANDARD_EPS,
        compare_merge_solver=None,
        profile=False,
        random_state=None,
        sv_storage="auto",
    ):
        self.budget = budget
        self.gamma = gamma
        self.C = C
        self.lambda_ = lambda_
        self.n_samples = n_samples
        self.epochs = epochs
        self.maintenance = maintenance
        self.merge_solver = merge_solver
        self.schedule = schedule
        self.eta = eta
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.gss_eps = gss_eps
        self.compare_merge_solver = compare_merge_solver
        self.profile = profile
        self.random_state = random_state
        self.sv_storage = sv_storage


@register_estimator
class BudgetedSCAClassifier(_Plain, StreamingBSCA):
    """Budgeted stochastic coordinate ascent (BSCA) kernel SVM; multi-class by one-vs-rest.

    Source: Qaadan, Schüler & Glasmachers (2019), "Dual SVM training on a budget", Algorithm 2
    (:mod:`svmstream.solvers.budgeted._bsca`).  :meth:`fit` is dataset mode (dual variables
    α ∈ [0, C]ⁿ, ``epochs`` epochs of n coordinate steps); :meth:`partial_fit` is streaming
    mode (each row a fresh coordinate, never revisited).  Budget maintenance as in
    :class:`BudgetedSGDClassifier`.  No hidden preprocessing.

    Parameters
    ----------
    budget, gamma, C, lambda_, n_samples, epochs, maintenance, merge_solver, gss_eps,
    compare_merge_solver, profile, random_state, sv_storage :
        As in :class:`BudgetedSGDClassifier` (C is the box constraint).
    sampling : {"permutation", "uniform"}, default="permutation"
        How an epoch of :meth:`fit` picks its coordinates: each once in a fresh random order,
        or n uniform draws with replacement (Algorithm 2 read literally).

    Attributes
    ----------
    classes_, n_features_in_, gamma_, support_vectors_, dual_coef_ (binary only)
    C_eff_ : float — the box constraint in use
    estimators_ : list — the binary models of one-vs-rest (more than two classes)

    Raises
    ------
    ValueError
        On an invalid parameter (naming it), non-finite input or an unknown label.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers import BudgetedSCAClassifier
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> clf = BudgetedSCAClassifier(budget=50, gamma=1.0, C=1.0, epochs=3, random_state=0)
    >>> clf = clf.fit(X[:300], y[:300])
    >>> clf.n_support_vectors_ <= 50, round(clf.score(X[300:], y[300:]), 2)
    (True, 0.96)
    """

    _parameter_constraints: dict = {**_KERNEL_COMMON, "sampling": [StrOptions(set(SAMPLINGS))]}
    ENGINE = StreamingBSCA

    def __init__(
        self,
        *,
        budget=500,
        gamma="scale",
        C=1.0,
        lambda_=None,
        n_samples=None,
        epochs=1,
        maintenance="merge",
        merge_solver="gss",
        gss_eps=GSS_STANDARD_EPS,
        compare_merge_solver=None,
        profile=False,
        random_state=None,
        sampling="permutation",
        sv_storage="auto",
    ):
        self.budget = budget
        self.gamma = gamma
        self.C = C
        self.lambda_ = lambda_
        self.n_samples = n_samples
        self.epochs = epochs
        self.maintenance = maintenance
        self.merge_solver = merge_solver
        self.gss_eps = gss_eps
        self.compare_merge_solver = compare_merge_solver
        self.profile = profile
        self.random_state = random_state
        self.sampling = sampling
        self.sv_storage = sv_storage


@register_estimator
class PegasosClassifier(_Plain, StreamingBSGD):
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

    _parameter_constraints: dict = {
        "C": _KERNEL_COMMON["C"],
        "lambda_": _KERNEL_COMMON["lambda_"],
        "n_samples": _KERNEL_COMMON["n_samples"],
        "epochs": _KERNEL_COMMON["epochs"],
        "random_state": ["random_state"],
        **_SCHEDULE,
    }
    # the engine's kernel-model settings, unused by a linear model
    kernel = "linear"
    budget = BUDGET_MIN
    gamma = "scale"
    maintenance = "merge"
    merge_solver = "gss"
    gss_eps = GSS_STANDARD_EPS
    compare_merge_solver = None
    profile = False
    sv_storage = "auto"
    ENGINE = StreamingBSGD
    ENGINE_FIXED = (
        "kernel",
        "budget",
        "gamma",
        "maintenance",
        "merge_solver",
        "gss_eps",
        "compare_merge_solver",
        "profile",
        "sv_storage",
    )

    def __init__(
        self,
        *,
        C=1.0,
        lambda_=None,
        n_samples=None,
        epochs=1,
        schedule="pegasos",
        eta=1.0,
        radius=None,
        fit_intercept=False,
        random_state=None,
    ):
        self.C = C
        self.lambda_ = lambda_
        self.n_samples = n_samples
        self.epochs = epochs
        self.schedule = schedule
        self.eta = eta
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.random_state = random_state
