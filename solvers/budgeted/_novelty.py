"""Budgeted one-class SVM (ν formulation) learned by NORMA's SGD step on a budget.

The numba kernel is :func:`._task_steps.oneclass_sgd_steps`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils import check_random_state

from .._hyperparameters import DEFAULT_NU, SCHEDULES
from ..persistence import register_estimator
from ._gss import GSS_STANDARD_EPS
from ._task_base import BudgetedTaskModel, constraints
from ._task_rehearsal import oneclass_stream
from ._task_steps import oneclass_sgd_steps
from ._weights import checked_weights, unit_weights


@register_estimator
class BudgetedOneClassSVM(OutlierMixin, BudgetedTaskModel):
    """Budgeted ν one-class SVM: scores, an offset ρ and inlier/outlier predictions.

    Minimises ``ν/2‖w‖² + (1/n)Σ max(0, ρ − ⟨w, φ(x_i)⟩) − νρ`` — Schölkopf et al. (2001),
    "Estimating the support of a high-dimensional distribution", eq. (3), times ν — by the
    NORMA step of Kivinen, Smola & Williamson (2004), §III-B, with the Gaussian kernel and at most
    ``budget`` support vectors (merging, Wang, Crammer & Vucetic 2012 §6; every coefficient is
    positive, so any two can merge).  ν is an upper bound on the fraction of training rows
    outside the boundary and a lower bound on the fraction of support vectors (Proposition 4).
    Conventions as scikit-learn's ``OneClassSVM``: :meth:`score_samples` = ⟨w, φ(x)⟩ (higher is
    more normal), :meth:`decision_function` = score − ρ, :meth:`predict` = +1 inside, −1 outside;
    ``offset_`` = ρ.  With LIBSVM's scaling, its ``dual_coef_`` is ν·n times ours.

    Parameters
    ----------
    budget : int >= 2, default=500
    gamma : float > 0 or "scale", default="scale"
        RBF width; "scale": 1/(d·Var(X)) of the first data seen.
    nu : float in (0, 1], default=0.5
    epochs : int >= 1, default=1
        Passes of :meth:`fit`, each a random permutation.
    maintenance : {"merge", "remove", "project"}, default="merge"
    merge_solver : {"gss", "gss-precise", "lookup-h", "lookup-wd"}, default="gss"
    schedule : {"pegasos", "norma", "constant"}, default="pegasos"
        η_t = 1/(νt) (λ = ν), eta/√t or eta.
    eta : float > 0, default=1.0
    gss_eps : float in (0, 1), default=0.01
    random_state : int, RandomState or None, default=None

    Attributes
    ----------
    offset_ : float, ρ; n_features_in_ : int; gamma_ : float; support_vectors_ : (n_sv, d);
    dual_coef_ : (n_sv,) float64 (all ≥ 0); last_decisions_ : (n,) float64 — score − ρ of each
    row of the last :meth:`partial_fit`, before its step.

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.budgeted.tasks import BudgetedOneClassSVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 2))
    >>> est = BudgetedOneClassSVM(budget=50, nu=0.1, epochs=5, random_state=0).fit(X)
    >>> bool(est.predict([[0.0, 0.0]])[0] == 1), bool(est.predict([[6.0, 6.0]])[0] == -1)
    (True, True)
    """

    _parameter_constraints: dict = constraints(
        "budget", "gamma", "nu", "epochs", "maintenance", "merge_solver", "schedule", "eta", "gss_eps",
        "random_state",
    )  # fmt: skip
    _parameter_constraints["schedule"] = [
        type(_parameter_constraints["schedule"][0])({"pegasos", "norma", "constant"})
    ]

    def __init__(
        self, *, budget=500, gamma="scale", nu=DEFAULT_NU, epochs=1, maintenance="merge", merge_solver="gss",
        schedule="pegasos", eta=1.0, gss_eps=GSS_STANDARD_EPS, random_state=None,
    ):  # fmt: skip
        self.budget = budget
        self.gamma = gamma
        self.nu = nu
        self.epochs = epochs
        self.maintenance = maintenance
        self.merge_solver = merge_solver
        self.schedule = schedule
        self.eta = eta
        self.gss_eps = gss_eps
        self.random_state = random_state

    def fit(self, X, y=None):
        """Learn ``epochs`` random-order passes over X (n, d) float64; ``y`` is ignored;
        returns self.  ValueError on NaN/inf or a bad parameter."""
        self._validate_params()
        X = self._rows(X, reset=True)
        self._start(X, reset=True)
        rng = check_random_state(self.random_state)
        for _ in range(self.epochs):
            self._steps(X, rng.permutation(X.shape[0]).astype(np.int64))
        return self

    def partial_fit(self, X, y=None, sample_weight=None):
        """One step per row of X (n, d), in the given order; ``y`` is ignored; returns self.
        ``sample_weight`` (n,) finite numbers >= 0 or None (ones): each row's importance weight,
        its hinge term scaled by w (``docs/weights.md``; w = 0 takes no step).  Raises ValueError
        on bad input (a bad weight naming ``sample_weight[i]``); the model is unchanged then."""
        first = not hasattr(self, "_sv_t")
        if first:
            self._validate_params()
        X = self._rows(X, reset=first)
        weights = checked_weights(sample_weight, X.shape[0])
        self._start(X, reset=first)
        self.last_decisions_ = self._steps(X, np.arange(X.shape[0], dtype=np.int64), weights)
        return self

    def _allocate(self, d):
        super()._allocate(d)
        self._rho = np.zeros(1)

    def _extra_state(self):
        return {"rho": self._rho.copy()}

    def _load_extra(self, arrays):
        self._rho[:] = np.asarray(arrays["rho"], dtype=np.float64).reshape(1)

    def _steps(self, X, order, weights=None):
        out = np.empty(order.shape[0])
        weights = unit_weights(X.shape[0]) if weights is None else weights
        oneclass_sgd_steps(
            X, weights, order, self._sv_t, self._sv_sq, self._coef, self._rho, self._counters, self._reals,
            self._k_inv, self.gamma_, float(self.nu), float(self.eta), int(self.budget),
            SCHEDULES[self.schedule], self._maintenance(), out, self._scratch(),
        )  # fmt: skip
        return out

    def stream_steps(self, X, y, weights, memory, rehearsal, draws, out, min_delta=0.0):
        """The streaming pipeline's call (:func:`._task_rehearsal.oneclass_stream`): a step per
        row of X (scaled) in order with its weight (n,), each followed by its reservoir offer and
        ``rehearsal`` extra steps (a remembered row's own weight); score − ρ before each own step
        in ``out``; ``y`` is ignored.  ``memory`` = (mem_X, mem_y (unused), mem_a (each row's
        weight summed over its entries), mem_n, mem_w, mem_s (its latest out-of-sample score));
        ``min_delta`` is the regressor's (no meaning here)."""
        mem_X, _, mem_a, mem_n, mem_w, mem_s = memory
        oneclass_stream(
            X, weights, self._sv_t, self._sv_sq, self._coef, self._rho, self._counters, self._reals, self._k_inv,
            self.gamma_, float(self.nu), float(self.eta), int(self.budget), SCHEDULES[self.schedule],
            self._maintenance(), self._scratch(), mem_X, mem_n, mem_w, mem_a, mem_s, int(rehearsal), draws, out,
        )  # fmt: skip

    @property
    def offset_(self) -> float:
        """ρ: the boundary is score = ρ."""
        return float(self._rho[0])

    def score_samples(self, X):
        """⟨w, φ(x)⟩ for the rows of X (n, d): (n,) float64, higher is more normal."""
        return self._raw_decision(X)  # _bias stays 0: ρ is _rho

    def decision_function(self, X):
        """score − ρ: (n,) float64, negative outside the boundary."""
        return self.score_samples(X) - self.offset_

    def predict(self, X):
        """+1 (inlier) where decision ≥ 0, −1 (outlier) elsewhere: (n,) int64."""
        return np.where(self.decision_function(X) >= 0.0, 1, -1)
