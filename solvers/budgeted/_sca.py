"""BSCA: budgeted stochastic coordinate ascent (Qaadan, Schüler & Glasmachers 2019), binary or
one-vs-rest; dataset mode (:meth:`BudgetedSCAClassifier.fit`) and streaming mode
(:meth:`BudgetedSCAClassifier.partial_fit`, and the rows a pipeline releases)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import REFERENCE_N, SAMPLINGS, check_choice, keep_params, parameter_constraints
from ..persistence import register_estimator
from ._base import DRIFT_RESET_T0, BudgetedKernelModel
from ._bsca import bsca_steps
from ._decision import squared_model_norm
from ._gss import GSS_STANDARD_EPS
from ._persist import calibrates
from ._sca_ovr import _SPARSE_POOL, OneVsRest
from ._sgd import KERNEL_PARAMS
from ._sparse_pool import run_with_room
from ._state import C_SCHED_SHIFT, C_STEPS
from ._weights import checked_weights, unit_weights


@register_estimator
class BudgetedSCAClassifier(OneVsRest, BudgetedKernelModel):
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

    _parameter_constraints: dict = parameter_constraints((*KERNEL_PARAMS, "sampling"))

    def __init__(
        self, *, budget=500, gamma="scale", C=1.0, lambda_=None, n_samples=None, epochs=1, maintenance="merge",
        merge_solver="gss", gss_eps=GSS_STANDARD_EPS, compare_merge_solver=None, profile=False,
        random_state=None, sampling="permutation", sv_storage="auto",
    ):  # fmt: skip
        keep_params(self, locals())

    # ------------------------------------------------------------------ parameters
    def check_params(self):
        """Validate the parameters; returns self.

        Raises
        ------
        ValueError
            Naming the first invalid parameter, e.g. ``budget must be an integer >= 2, got 1``.
        """
        self._check_budget_params()
        check_choice("sampling", self.sampling, SAMPLINGS)
        self._validate_params()
        return self

    def _resolve_lambda(self, n_rows):
        # n as in resolve_lambda: n_samples, else fit's rows, else the stream's REFERENCE_N
        n = self.n_samples if self.n_samples is not None else (n_rows if n_rows is not None else REFERENCE_N)
        self.C_eff_ = float(self.C) if self.lambda_ is None else 1.0 / (float(self.lambda_) * n)
        return 1.0 / (self.C_eff_ * n)

    # ------------------------------------------------------------------ one-vs-rest

    def _reset_schedule(self, t0=DRIFT_RESET_T0):
        """BSCA has no step size: a restart (:meth:`restart_schedule`) scales the coefficients by t0 / (steps since
        the last reset), so the old model weighs like ``t0`` examples (default ``DRIFT_RESET_T0``)."""
        if self._is_ovr():
            for binary in getattr(self, "estimators_", []):
                binary._reset_schedule(t0)
            return
        since = int(self._counters[C_STEPS] - self._counters[C_SCHED_SHIFT])
        if since > t0:
            self._coef *= t0 / since
        self._counters[C_SCHED_SHIFT] = max(0, int(self._counters[C_STEPS]) - t0)

    def _add_class_arrays(self, rehearsal=None):
        """Binary → one-vs-rest with models (−w, w, 0); one-vs-rest: one more (empty) model
        (each with its stage of the pipeline's rehearsal stage ``rehearsal``, if given)."""
        k = self.classes_.shape[0]
        if k > 2:
            if hasattr(self, "estimators_"):
                self.estimators_.append(self._fresh_binary(k, rehearsal))
            return
        if not self.__dict__.get(
            "_pool_pending", True
        ):  # learning has started: the binary model becomes models 0 and 1
            self.estimators_ = [
                self._binary_copy(0, -1.0, rehearsal),
                self._binary_copy(1, 1.0, rehearsal),
                self._fresh_binary(2, rehearsal),
            ]
        for name in ("_sv_t", "_sv_sq", "_coef", "_k_inv", "_x_buf", "_row_buf", *_SPARSE_POOL):
            if hasattr(self, name):
                setattr(self, name, np.zeros((0,) * getattr(self, name).ndim, getattr(self, name).dtype))

    # ------------------------------------------------------------------ the step
    def _steps(self, X, signs, order, alpha, stream, margins, weights=None):
        """BSCA steps over ``X[order]``: dense X (n, d), or CSR arrays for sparse SVs;
        ``weights`` (n,) float64 importance weights (None: ones; the box of row i is C·w_i)."""
        maintenance, scratch = self._maintenance_config(), self._scratch()
        weights = unit_weights(signs.shape[0]) if weights is None else weights

        def step(order_part, margins_part, pool):
            return self._bsca_call(
                X, signs, weights, order_part, alpha, stream, pool, maintenance, scratch, margins_part
            )

        if self._sparse_svs():
            run_with_room(step, X, order, margins, self)
        else:
            step(order, margins, self._sv_t)

    def _bsca_call(self, X, signs, weights, order, alpha, stream, pool, maintenance, scratch, margins):
        return bsca_steps(
            X,
            signs,
            weights,
            order,
            alpha,
            stream,
            self.C_eff_,
            pool,
            self._sv_sq,
            self._coef,
            self._counters,
            self._reals,
            self._k_inv,
            self.gamma_,
            int(self.budget),
            maintenance,
            bool(self.profile),
            margins,
            scratch,
        )

    def _learn_plan(self, X_ext, y_ext, w_ext, order, memory, gather):
        """Rehearsal: new rows are fresh coordinates (α = 0); remembered rows carry their α, so
        drawing one again is a coordinate-ascent revisit (dataset-mode step, Algorithm 2)."""
        self._ensure_pool()
        alpha_ext = memory.alpha_ext(X_ext.shape[0] - gather.shape[0], gather)
        margins = np.empty(order.shape[0], dtype=np.float64)
        if self._sparse_svs():
            X_ext = self._csr_input(X_ext)
        elif sp.issparse(X_ext):
            X_ext = np.ascontiguousarray(X_ext.toarray())
        self._steps(X_ext, y_ext, order, alpha_ext, False, margins, w_ext)
        return margins, alpha_ext

    def _apply(self, X, labels, weights, order, margins):
        """Streaming mode over X[order] (used by partial_fit through ``_learn``)."""
        self._steps(X, labels, order, np.zeros(0), True, margins[:, 0], weights)

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, callback=None):
        """Dataset-mode BSCA for ``epochs`` epochs of n coordinates (see ``sampling``).

        X : (n, d) array-like or scipy sparse; y : (n,) labels (≥ 2 classes; more than two:
        one-vs-rest).  ``callback(estimator, epoch)`` is called after each epoch.
        Raises ValueError on invalid parameters or input.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_classification_targets(y)
        classes = np.unique(y)
        if classes.shape[0] > 2:
            self._fit_ovr(X, y, classes, callback)
            return self
        X = X_raw = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_sv_storage(X)
        self._init_state(X.shape[1], classes, X.shape[0], streaming=False)
        signs = self._encode_labels(y)
        self._resolve_gamma(X)  # fit sees all its data: gamma="scale" from all of X
        n = X.shape[0]
        self.dual_alpha_ = np.zeros(n, dtype=np.float64)
        if self._sparse_svs():
            X = self._csr_input(X)
        elif sp.issparse(X):
            X = np.ascontiguousarray(X.toarray())  # coordinates are revisited at random
        for epoch in range(int(self.epochs)):
            if self.sampling == "permutation":
                order = self.rng_.permutation(n).astype(np.int64)
            else:
                order = self.rng_.integers(0, n, n).astype(np.int64)
            self._steps(X, signs, order, self.dual_alpha_, False, np.empty(n))
            if callback is not None:
                callback(self, epoch + 1)
        # probabilities: BSCA's margins in later epochs include each point's own α, so the
        # calibration uses the final model's decisions on the training rows
        self.calibrator_.fit(self.decision_function(X_raw), self._class_index(signs))
        return self

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Streaming-mode BSCA: one step per row of X, in order (fresh coordinates); a row of
        weight w has the box 0 <= α <= C·w (``docs/weights.md``).

        ``classes`` is required on the first call; more than two: one-vs-rest (every binary
        model learns every row, with its weight).  Raises ValueError on bad input (a bad
        weight naming ``sample_weight[i]``); the model is unchanged in that case."""
        first = not hasattr(self, "classes_")
        if not (self._is_ovr() or (first and classes is not None and np.unique(classes).shape[0] > 2)):
            return super().partial_fit(X, y, classes, sample_weight)
        if first:
            self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        weights = checked_weights(sample_weight, X.shape[0])
        if first:
            self._resolve_sv_storage(X)
            self._start_ovr(X.shape[1], classes, streaming=True)
        index = self._encode_labels(y)  # validates every label before any model changes
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_gamma(X)
        self._ovr_learn((X, index, np.ones(index.shape[0], dtype=bool), weights))
        return self

    def learn_rows(self, fed, rehearsal=None):
        """Learn rows released by a pipeline's order stage (see
        :meth:`BudgetedKernelModel.learn_rows`); one-vs-rest: every binary model, each with
        its own stage of ``rehearsal``.  Returns self."""
        if not self._is_ovr():
            return super().learn_rows(fed, rehearsal)
        self._ovr_learn(fed, rehearsal)
        return self

    def flush(self):
        """See :meth:`BudgetedKernelModel.flush`; returns self."""
        if not self._is_ovr():
            return super().flush()
        self._ovr_learn(None)
        return self

    def grow_features(self, n_features, rehearsal=None):
        """Widen the model to ``n_features`` (see :meth:`BudgetedKernelModel.grow_features`;
        one-vs-rest: the binary models' arrays)."""
        if not self._is_ovr():
            return super().grow_features(n_features, rehearsal)
        d_old, d_new = self.n_features_in_, int(n_features)
        if d_new < d_old:
            raise ValueError(f"n_features must be >= the model's {d_old}, got {n_features!r}")
        if d_new == d_old:
            return self
        for binary in getattr(self, "estimators_", []):
            if hasattr(binary, "classes_"):
                binary._grow_arrays(d_new)
        if rehearsal is not None:  # the binary models' remembered rows too
            rehearsal.widen(d_new)
        self.n_features_in_ = d_new
        self._ovr_learn(None)
        return self

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """(n,) float64 for binary models; (n, n_classes) one-vs-rest scores otherwise."""
        check_is_fitted(self, "classes_")
        if self._is_ovr():
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
            return np.column_stack([b.decision_function(X) for b in self.estimators_])
        return super().decision_function(X)

    # ------------------------------------------------------------------ monitoring
    def objectives(self, X, y):
        """Primal and dual objectives of the current budgeted model on (X, y) — O(n·B + B²).

        Returns a dict with ``primal`` = λ/2‖w̃‖² + mean hinge loss (λ-form),
        ``primal_C`` = ½‖w̃‖² + C·Σ hinge, and — after :meth:`fit` (dataset mode) —
        ``dual`` = Σα − ½‖w̃‖², the dual objective with ‖w(α)‖² replaced by the budgeted
        model's ‖w̃‖² (the exact ‖w(α)‖² would cost O(n²)).  Binary models only.
        """
        check_is_fitted(self, "classes_")
        if self._is_ovr():
            raise ValueError("objectives are defined per binary model; use estimators_[k]")
        signs = self._encode_labels(np.asarray(y))
        margins = signs * self.decision_function(X)
        hinge = np.maximum(0.0, 1.0 - margins)
        norm2 = squared_model_norm(
            self._pool(np.zeros(self.n_features_in_)),
            self._sv_sq,
            self._coef,
            self.n_support_vectors_,
            self.gamma_,
            np.zeros_like(self._x_buf),  # all zeros: a sparse pool scatters into it
            np.empty_like(self._row_buf),
        )
        out = {
            "norm2": norm2,
            "primal": 0.5 * self.lambda_eff_ * norm2 + hinge.mean(),
            "primal_C": 0.5 * norm2 + self.C_eff_ * hinge.sum(),
        }
        if hasattr(self, "dual_alpha_"):
            out["dual"] = float(self.dual_alpha_.sum() - 0.5 * norm2)
        return out

    def statistics(self):
        if self._is_ovr():
            parts = [b.statistics() for b in getattr(self, "estimators_", [])]
            if not parts:  # warm-up window still open: nothing learned yet
                return {
                    "n_support_vectors": 0,
                    "budget": int(self.budget),
                    "steps": 0,
                    "examples_seen": 0,
                    "violations": 0,
                    "maintenance_events": 0,
                    "merges": 0,
                    "merging_frequency": 0.0,
                    "average_weight_degradation": 0.0,
                    "sv_storage": getattr(self, "sv_storage_", None),
                    "sv_nonzeros": 0,
                    "rehearsal_steps": 0,
                }
            total = {k: sum(p[k] for p in parts) for k in parts[0] if k != "sv_storage"}
            total["sv_storage"] = getattr(self, "sv_storage_", None)
            total["budget"] = int(self.budget)
            total["examples_seen"] = self.n_seen_
            steps = max(total["steps"], 1)
            total["merging_frequency"] = total["maintenance_events"] / steps
            total["per_class"] = parts
            return total
        return super().statistics()

    # ------------------------------------------------------------------ counters for OvR
    @property
    def n_support_vectors_(self):
        if self._is_ovr():
            return sum(b.n_support_vectors_ for b in getattr(self, "estimators_", []))
        return super().n_support_vectors_

    @property
    def sv_nonzeros_(self):
        if self._is_ovr():
            return sum(b.sv_nonzeros_ for b in getattr(self, "estimators_", []) if hasattr(b, "classes_"))
        return super().sv_nonzeros_

    @property
    def t_(self):
        if self._is_ovr():
            return self.estimators_[0].t_ if hasattr(self, "estimators_") else 0
        return super().t_

    @property
    def n_seen_(self):
        if self._is_ovr():
            return self.t_ - self.n_rehearsed_
        return super().n_seen_

    # ------------------------------------------------------------------ persistence
    def get_state(self):
        """``(arrays, meta)``; one-vs-rest models store each binary model under a prefix."""
        check_is_fitted(self, "classes_")
        if not self._is_ovr():
            arrays, meta = super().get_state()
            meta["C_eff"] = self.C_eff_
            return arrays, meta
        arrays = {"classes": self.classes_.copy(), "ovr_counters": self._counters.copy()}
        monitors = self._calibrator_state(arrays)
        metas = []
        for k, binary in enumerate(getattr(self, "estimators_", [])):
            if not hasattr(binary, "classes_"):
                metas.append(None)
                continue
            sub_arrays, sub_meta = binary.get_state()
            arrays.update({f"ovr{k}__{name}": value for name, value in sub_arrays.items()})
            metas.append(sub_meta)
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": self.get_params(),
            "n_features_in": self.n_features_in_,
            "sv_storage": getattr(self, "sv_storage_", "dense"),
            "ovr": metas,
            "gamma": self.gamma_,
            **monitors,
            "rng_state": self.rng_.bit_generator.state,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        if "ovr" not in meta:
            est = super().from_state(arrays, meta)
            est.C_eff_ = float(meta["C_eff"])
            return est
        if meta.get("state_version") not in cls.STATE_VERSIONS:
            raise ValueError(f"unsupported {cls.__name__} state version {meta.get('state_version')}")
        est = cls.from_params(dict(meta["params"]))
        est.sv_storage_ = meta.get("sv_storage", "dense")  # version <= 5: dense SVs
        est._start_ovr(meta["n_features_in"], arrays["classes"], streaming=True, calibrate=calibrates(meta))
        est._load_gamma(meta)
        if "rng_state" in meta:
            est.rng_.bit_generator.state = meta["rng_state"]
        if meta["ovr"]:
            est.estimators_ = []
        for k, sub_meta in enumerate(meta["ovr"]):
            if sub_meta is None:
                ready = est.gamma_ is not None
                est.estimators_.append(est._fresh_binary(k) if ready else est._make_binary(k))
                continue
            prefix = f"ovr{k}__"
            sub = {name[len(prefix) :]: value for name, value in arrays.items() if name.startswith(prefix)}
            binary = BudgetedSCAClassifier.from_state(sub, sub_meta)
            binary._ovr_child = True
            est.estimators_.append(binary)
        est._load_calibrator(arrays, meta)
        if "ovr_counters" in arrays:
            est._counters[:] = arrays["ovr_counters"]
        fitted = [b for b in getattr(est, "estimators_", []) if hasattr(b, "C_eff_")]
        if fitted:
            est.C_eff_ = fitted[0].C_eff_
            est.lambda_eff_ = fitted[0].lambda_eff_
        return est

    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True, calibrate=True):
        super()._init_state(n_features, classes, n_rows, streaming, ready, calibrate)
        if self._coef.shape[1] != 1:
            raise ValueError(f"{type(self).__name__} models are binary; use fit for one-vs-rest")
