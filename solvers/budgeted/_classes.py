"""The public budgeted estimators: :class:`BudgetedSGDClassifier` (BSGD) and
:class:`BudgetedSCAClassifier` (BSCA).

Both share state, prediction and persistence through :class:`._base.BudgetedKernelModel`;
each adds its parameter checks and its numba batch step (:func:`._bsgd.bsgd_steps`,
:func:`._bsca.bsca_steps`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import (
    KERNELS_ONLINE,
    REFERENCE_N,
    REFERENCE_N_LINEAR,
    SAMPLINGS,
    SCHEDULES,
    check_choice,
    check_positive,
)
from ..persistence import register_estimator
from ._base import DRIFT_RESET_T0, BudgetedKernelModel, resolve_lambda
from ._bsca import bsca_steps
from ._bsgd import bsgd_steps
from ._decision import squared_model_norm
from ._gss import GSS_STANDARD_EPS
from ._linear import linear_decision, linear_steps_csr, linear_steps_dense, pack_weights, unpack_weights
from ._preprocessing import csr_arrays
from ._publish import note_weight_rows
from ._sparse_pool import run_with_room
from ._state import C_SCHED_SHIFT, C_STEPS, N_COUNTERS, R_SCALE

#: The arrays of a sparse SV pool (``BudgetedKernelModel._alloc_pool``).
_SPARSE_POOL = ("_sv_data", "_sv_idx", "_sv_start", "_sv_len", "_sv_used", "_sv_scratch")


@register_estimator
class StreamingBSCA(BudgetedKernelModel):
    """The BSCA engine: budgeted stochastic coordinate ascent.  Users meet it as
    :class:`svmstream.solvers.BudgetedSCAClassifier` or inside
    :class:`svmstream.solvers.StreamingClassifier`, whose stages give it rows already scaled and
    ordered (:meth:`learn_rows`).

    Source: Qaadan, Schüler & Glasmachers (2019), "Dual SVM training on a budget",
    Algorithm 2 (see :mod:`svmstream.solvers.budgeted._bsca`).  Budget maintenance as in the BSGD family
    (merging by default, every strategy and merge solver of :class:`BudgetedSGDClassifier`).

    * :meth:`fit` — dataset mode: dual variables α ∈ [0, C]ⁿ, ``epochs`` epochs of n
      iterations; ``sampling`` chooses how an epoch picks its coordinates.
    * :meth:`partial_fit` — streaming mode: every example is a fresh coordinate with α = 0
      that is never revisited (δ = [(1 − y·f̃(x))/k(x,x)]₀^C).
    * Multi-class: one-vs-rest over binary BSCA models, each with its own budget.

    Parameters
    ----------
    budget : int >= 2; gamma : float > 0 (k(x,x') = exp(−γ‖x−x'‖²))
    C : float > 0 — box constraint; with ``lambda_`` given, C = 1/(n·λ) instead
    lambda_ : float > 0 or None; n_samples : int or None (n in C = 1/(nλ))
    epochs : int >= 1 — epochs of n random coordinate iterations in :meth:`fit`
    sampling : ``"permutation"`` (default) — every epoch visits each coordinate once, in a
        fresh random order, so one epoch is one pass over the data (the paper's "single
        pass"); ``"uniform"`` — n independent uniform draws with replacement per epoch
        (Algorithm 2 read literally; about 37% of the points are not seen in an epoch).
        On a9a (C = 32, B = 500) one epoch gives a median of 83.4% with permutations and
        77.6% with uniform draws (5 seeds; ``docs/algorithms.md``).
    maintenance, merge_solver, gss_eps, compare_merge_solver, profile : as in
        :class:`BudgetedSGDClassifier`
    random_state : int or None — seed of the coordinate draws
    (drift: BSCA has no step size, so :meth:`restart_schedule` scales the coefficients by
    t0 / (steps since the last restart))
    sv_storage : {"auto", "dense", "sparse"} — as in :class:`BudgetedSGDClassifier`
    (rehearsal, a stage of the pipeline: a rehearsal step revisits a remembered example's
    coordinate with its stored α (dataset-mode step, :meth:`_learn_plan`), the LaSVM-style
    reprocessing of old examples; one-vs-rest models share the memory bound)

    Attributes
    ----------
    classes_, n_features_in_, support_vectors_, dual_coef_ (binary only), statistics()
    C_eff_ : float — the box constraint in use
    dual_alpha_ : (n,) float64 — α after :meth:`fit` (dataset mode, binary only)
    estimators_ : list of binary BudgetedSCAClassifier — multi-class (one-vs-rest) only

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers.budgeted import StreamingBSCA
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> clf = StreamingBSCA(budget=50, epochs=3, random_state=0).fit(X[:300], y[:300])
    >>> clf.n_support_vectors_ <= 50, round(clf.score(X[300:], y[300:]), 2)
    (True, 0.95)
    """

    def __init__(
        self,
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
        return self

    def _resolve_lambda(self, n_rows):
        # n as in resolve_lambda: n_samples, else fit's rows, else the stream's REFERENCE_N
        n = self.n_samples if self.n_samples is not None else (n_rows if n_rows is not None else REFERENCE_N)
        self.C_eff_ = float(self.C) if self.lambda_ is None else 1.0 / (float(self.lambda_) * n)
        return 1.0 / (self.C_eff_ * n)

    # ------------------------------------------------------------------ one-vs-rest
    def _is_ovr(self):
        return hasattr(self, "classes_") and self.classes_.shape[0] > 2

    def _make_binary(self, k):
        """Binary model k of one-vs-rest: it learns the rows the parent is given, with its γ."""
        params = self.engine_params()
        params.update(gamma=self.gamma_, sv_storage=getattr(self, "sv_storage_", "dense"))
        if self.random_state is not None:
            params["random_state"] = int(self.random_state) + k
        child = StreamingBSCA(**params)  # the engine, whatever face the parent wears
        child._ovr_child = True
        if self._rehearsal is not None:  # its own memory; the K binary models share the bound
            child._rehearsal = self._rehearsal.child(k, self.classes_.shape[0], params["random_state"])
        return child

    def _start_ovr(self, n_features, classes, streaming):
        self.classes_ = np.unique(classes)
        self.n_features_in_ = int(n_features)
        self.rng_ = np.random.default_rng(self.random_state)
        self.gamma_ = self._given_gamma()
        self._new_calibrator()
        self._counters = np.zeros(N_COUNTERS, dtype=np.int64)  # one-vs-rest: zeros (the children count)
        self.last_margins_ = np.zeros((0, self.classes_.shape[0]))
        self.last_y_ = self.classes_[:0]

    def _ovr_learn(self, fed):
        """One streaming step per released row for every binary model (None: nothing released);
        records margins and labels of the original (not replayed) rows and calibrates as
        :meth:`BudgetedKernelModel._learn_fed`."""
        if fed is None or fed[0].shape[0] == 0:
            self.last_margins_, self.last_y_ = np.zeros((0, self.classes_.shape[0])), self.classes_[:0]
            return
        X, index, original = fed
        if not hasattr(self, "estimators_"):
            self.estimators_ = [self._fresh_binary(k) for k in range(self.classes_.shape[0])]
        for k, binary in enumerate(self.estimators_):
            binary.partial_fit(X, np.where(index == k, 1.0, -1.0), classes=[-1.0, 1.0])
        self.C_eff_ = self.estimators_[0].C_eff_
        self.lambda_eff_ = self.estimators_[0].lambda_eff_
        self.last_margins_ = np.column_stack([b.last_margins_ for b in self.estimators_])[original]
        self._calibrate(self.last_margins_, index[original])
        self.last_y_ = self.classes_[index[original].astype(np.intp)]

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

    def _add_class_arrays(self):
        """Binary → one-vs-rest with models (−w, w, 0); one-vs-rest: one more (empty) model."""
        k = self.classes_.shape[0]
        if k > 2:
            if hasattr(self, "estimators_"):
                self.estimators_.append(self._fresh_binary(k))
            return
        if not self.__dict__.get(
            "_pool_pending", True
        ):  # learning has started: the binary model becomes models 0 and 1
            self.estimators_ = [self._binary_copy(0, -1.0), self._binary_copy(1, 1.0), self._fresh_binary(2)]
        for name in ("_sv_t", "_sv_sq", "_coef", "_k_inv", "_x_buf", "_row_buf", *_SPARSE_POOL):
            if hasattr(self, name):
                setattr(self, name, np.zeros((0,) * getattr(self, name).ndim, getattr(self, name).dtype))

    def _fresh_binary(self, k):
        """One-vs-rest model k, fitted state allocated, no support vectors yet."""
        binary = self._make_binary(k)
        binary._init_state(self.n_features_in_, np.array([-1.0, 1.0]), streaming=True)
        return binary

    def _binary_copy(self, k, sign):
        """One-vs-rest model k holding this binary model's SVs with coefficients × ``sign``."""
        binary = self._fresh_binary(k)
        for name in ("_sv_t", "_sv_sq", "_counters", "_reals", "_k_inv", "merge_diagnostics_"):
            getattr(binary, name)[...] = getattr(self, name)
        if self._sparse_svs():
            for name in _SPARSE_POOL:
                setattr(binary, name, getattr(self, name).copy())
        binary._coef[...] = sign * self._coef
        binary.C_eff_, binary.lambda_eff_ = self.C_eff_, self.lambda_eff_
        return binary

    # ------------------------------------------------------------------ the step
    def _steps(self, X, signs, order, alpha, stream, margins):
        """BSCA steps over ``X[order]``: dense X (n, d), or CSR arrays for sparse SVs."""
        maintenance, scratch = self._maintenance_config(), self._scratch()

        def step(order_part, margins_part, pool):
            return self._bsca_call(
                X, signs, order_part, alpha, stream, pool, maintenance, scratch, margins_part
            )

        if self._sparse_svs():
            run_with_room(step, X, order, margins, self)
        else:
            step(order, margins, self._sv_t)

    def _bsca_call(self, X, signs, order, alpha, stream, pool, maintenance, scratch, margins):
        return bsca_steps(
            X,
            signs,
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

    def _learn_plan(self, X_ext, y_ext, order, memory, gather):
        """Rehearsal: new rows are fresh coordinates (α = 0); remembered rows carry their α, so
        drawing one again is a coordinate-ascent revisit (dataset-mode step, Algorithm 2)."""
        self._ensure_pool()
        alpha_ext = memory.alpha_ext(X_ext.shape[0] - gather.shape[0], gather)
        margins = np.empty(order.shape[0], dtype=np.float64)
        if self._sparse_svs():
            X_ext = self._csr_input(X_ext)
        elif sp.issparse(X_ext):
            X_ext = np.ascontiguousarray(X_ext.toarray())
        self._steps(X_ext, y_ext, order, alpha_ext, False, margins)
        return margins, alpha_ext

    def _apply(self, X, labels, order, margins):
        """Streaming mode over X[order] (used by partial_fit through ``_learn``)."""
        self._steps(X, labels, order, np.zeros(0), True, margins[:, 0])

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

    def _fit_ovr(self, X, y, classes, callback):
        self._resolve_sv_storage(X)
        self._start_ovr(X.shape[1], classes, streaming=False)
        X_raw = X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_gamma(X)
        self.estimators_ = []
        for k, label in enumerate(classes):
            binary = self._make_binary(k)
            binary.fit(X, np.where(y == label, 1.0, -1.0))
            self.estimators_.append(binary)
        self.C_eff_ = self.estimators_[0].C_eff_
        self.lambda_eff_ = self.estimators_[0].lambda_eff_
        self.calibrator_.fit(self.decision_function(X_raw), np.searchsorted(classes, y))
        if callback is not None:
            callback(self, int(self.epochs))

    def partial_fit(self, X, y, classes=None):
        """Streaming-mode BSCA: one step per row of X, in order (fresh coordinates).

        ``classes`` is required on the first call; more than two: one-vs-rest (every binary
        model learns every row).  Raises ValueError on bad input; the model is unchanged in
        that case."""
        first = not hasattr(self, "classes_")
        if not (self._is_ovr() or (first and classes is not None and np.unique(classes).shape[0] > 2)):
            return super().partial_fit(X, y, classes)
        if first:
            self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        if first:
            self._resolve_sv_storage(X)
            self._start_ovr(X.shape[1], classes, streaming=True)
        index = self._encode_labels(y)  # validates every label before any model changes
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_gamma(X)
        self._ovr_learn((X, index, np.ones(index.shape[0], dtype=bool)))
        return self

    def learn_rows(self, fed):
        """Learn rows released by a pipeline's order stage (see
        :meth:`BudgetedKernelModel.learn_rows`); one-vs-rest: every binary model.  Returns self."""
        if not self._is_ovr():
            return super().learn_rows(fed)
        self._ovr_learn(fed)
        return self

    def flush(self):
        """See :meth:`BudgetedKernelModel.flush`; returns self."""
        if not self._is_ovr():
            return super().flush()
        self._ovr_learn(None)
        return self

    def grow_features(self, n_features):
        """Widen the model to ``n_features`` (see :meth:`BudgetedKernelModel.grow_features`)."""
        if not self._is_ovr():
            return super().grow_features(n_features)
        d_old, d_new = self.n_features_in_, int(n_features)
        if d_new < d_old:
            raise ValueError(f"n_features must be >= the model's {d_old}, got {n_features!r}")
        if d_new == d_old:
            return self
        for binary in getattr(self, "estimators_", []):
            if hasattr(binary, "classes_"):
                binary._grow_arrays(d_new)
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

    @property
    def n_rehearsed_(self):
        if self._is_ovr():  # every binary model learns the same rows with the same rehearsal
            return self.estimators_[0].n_rehearsed_ if getattr(self, "estimators_", None) else 0
        return super().n_rehearsed_

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
        est._start_ovr(meta["n_features_in"], arrays["classes"], streaming=True)
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
            binary = StreamingBSCA.from_state(sub, sub_meta)
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

    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True):
        super()._init_state(n_features, classes, n_rows, streaming, ready)
        if self._coef.shape[1] != 1:
            raise ValueError(f"{type(self).__name__} models are binary; use fit for one-vs-rest")


@register_estimator
class StreamingBSGD(BudgetedKernelModel):
    """The BSGD engine: budgeted SGD (binary, or multi-class by Crammer–Singer).  Users meet it
    as :class:`svmstream.solvers.BudgetedSGDClassifier` or :class:`svmstream.solvers.PegasosClassifier`,
    or inside :class:`svmstream.solvers.StreamingClassifier`, whose stages give it rows already
    scaled and ordered (:meth:`learn_rows`).

    Source: Wang, Crammer & Vucetic (2012), Algorithm 1 and §5 (multi-class), learning-rate
    schedules of Table 2, budget maintenance of §6; merging by golden section search or the
    lookup tables of Glasmachers & Qaadan (2018).  The model never holds more than
    ``budget`` support vectors.

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
    maintenance : {"merge", "remove", "project"}
        Budget maintenance strategy (§6): merge two SVs; remove the SV with the smallest
        ‖α_p‖²; or project it onto the others (eq. 14).
    merge_solver : {"gss", "gss-precise", "lookup-h", "lookup-wd"}
        How merging finds h and the partner (GSS to ``gss_eps``; GSS to 1e-10; lookup tables).
        Multi-class merging has no lookup table: it runs GSS to ``gss_eps`` with ``"gss"``
        and GSS to 1e-10 with every other solver.
    schedule : {"pegasos", "norma", "perceptron", "constant"}
        η_t = 1/(λt); η_t = eta/√t; the margin perceptron (λ = 0, η_t = eta, projection
        onto ‖w‖ ≤ radius); or a fixed η_t = eta with the shrink 1 − ηλ, a memory of about
        1/(ηλ) examples, for streams known to drift (eta = 1, λ = 1/30,000: ~30,000).
    eta : float > 0
        Base learning rate of Norma and the perceptron.
    radius : float > 0 or None
        U of the perceptron's ball; default 1/√λ.
    fit_intercept : bool
        Learn a bias b (Glasmachers & Qaadan eq. 1) with the same rate η_t, unregularised.
    gss_eps : float in (0, 1)
        Golden section search tolerance of GSS-standard (papers: 0.01).
    compare_merge_solver : str or None
        Diagnostics: at every merge also run this solver's partner search (not applied) and
        accumulate agreement and weight degradation in ``merge_diagnostics_``.
    profile : bool
        Measure the wall time of budget maintenance (``maintenance_seconds_``).
    random_state : int or None
        Seed of the epoch shuffles of :meth:`fit`.
    (rehearsal: the rehearsal stage of :class:`svmstream.solvers.online.StreamingClassifier`
    plans extra steps on remembered examples, :mod:`svmstream.solvers.online.stages.rehearsal`;
    :meth:`restart_schedule` empties its memory)
    kernel : {"rbf", "linear"}
        ``"rbf"``: the budgeted Gaussian-kernel SVM above.  ``"linear"``: a linear SVM,
        Pegasos with an explicit weight matrix W (d, K) — K = 1 binary, one column per class
        by Crammer–Singer — with the same scale trick, schedules, optional bias, drift reset,
        classes, calibration and persistence (:mod:`._linear`).  It has no support vectors:
        ``budget``, ``maintenance``, ``merge_solver``, ``gss_eps``, ``compare_merge_solver``,
        ``gamma`` (``gamma_`` is None) are ignored and ``n_support_vectors_`` is 0.  Sparse
        rows stay sparse (O(nnz·K) per step); its default λ differs where one pass over text
        needs it (measured, ``docs/defaults.md``): λ = 1/(C · 5,000) for a stream (2e-4 for
        C = 1).

    Attributes
    ----------
    classes_ : (n_classes,) ndarray; binary: ``classes_[0]`` ↔ −1, ``classes_[1]`` ↔ +1
    n_features_in_ : int
    lambda_eff_ : float — the λ in use
    support_vectors_ : (n_sv, d) float64; dual_coef_ : effective α; intercept_ : (K,)
    coef_ : (1, d) or (n_classes, d) float64 — ``kernel="linear"`` only: the weights, so that
        ``decision_function(X) = X @ coef_.T + intercept_``
    n_support_vectors_, t_, n_seen_, n_merges_, n_violations_, n_maintenance_ : int
        ``t_`` counts learning steps (a pipeline's replayed and rehearsed rows included);
        ``n_seen_`` = ``t_`` − rehearsal steps
    weight_degradation_total_ : float — Σ of the WD of all maintenance events
    last_margins_ : f(x) before each step of the last fit/partial_fit/flush on a received
        example (replayed examples are left out); ``last_y_`` their labels
    merge_diagnostics_ : (6,) float64, see :mod:`svmstream.solvers.budgeted._merging` ``D_*``
    calibrator_ : :class:`svmstream.solvers.calibration.MarginCalibrator` — maps decisions to
        :meth:`predict_proba`, learned from the prequential margins

    Drift: :meth:`restart_schedule` restarts the schedule at t0 = 30,000 (Pegasos:
    η = 1/(λ t0)), keeping the support vectors; the drift stage of
    :class:`svmstream.solvers.online.StreamingClassifier` calls it after a detection.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers.budgeted import StreamingBSGD
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> clf = StreamingBSGD(budget=50, epochs=3, random_state=0).fit(X[:300], y[:300])
    >>> clf.n_support_vectors_ <= 50, round(clf.score(X[300:], y[300:]), 2), round(clf.gamma_, 3)  # γ from the data
    (True, 0.94, 0.923)

    Streaming: one step per example, in the order given.

    >>> stream = StreamingBSGD(budget=50, random_state=0)
    >>> for start in range(0, 300, 50):
    ...     stream = stream.partial_fit(X[start : start + 50], y[start : start + 50], classes=[0, 1])
    >>> stream.n_seen_, stream.n_support_vectors_ <= 50
    (300, True)
    """

    def __init__(
        self,
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
        kernel="rbf",
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
        self.kernel = kernel
        self.sv_storage = sv_storage

    def check_params(self):
        """Validate the parameters; returns self.

        Raises
        ------
        ValueError
            Naming the first invalid parameter, e.g. ``budget must be an integer >= 2, got 1``.
        """
        self._check_budget_params()
        check_positive("eta", self.eta)
        check_positive("radius", self.radius, allow_none=True)
        check_choice("schedule", self.schedule, SCHEDULES)
        check_choice("kernel", self.kernel, KERNELS_ONLINE)
        return self

    # ------------------------------------------------------------------ kernel="linear"
    # A linear model keeps the kernel model's state (counters, reals, bias, an SV matrix with
    # no columns) and adds W (d, K); the methods below switch on ``kernel``.
    def _resolve_sv_storage(self, X, scaling="none"):
        if self._linear():  # no support vectors
            self.sv_storage_ = None
            return
        super()._resolve_sv_storage(X, scaling)

    def _sv_capacity(self):
        return 0 if self._linear() else super()._sv_capacity()

    def _resolve_lambda(self, n_rows):
        if not self._linear():
            return super()._resolve_lambda(n_rows)
        n = n_rows if n_rows is not None else REFERENCE_N_LINEAR  # a stream: the linear reference n
        return resolve_lambda(self.lambda_, self.C, self.n_samples, n)

    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True):
        super()._init_state(n_features, classes, n_rows, streaming, ready)
        if self._linear():
            self._W = np.zeros((self.n_features_in_, self._coef.shape[1]))
            self._idx_buf = np.zeros(self.n_features_in_, dtype=np.int32)

    def _learn(self, X, labels, order):
        """Linear models: one Pegasos step per row of ``X[order]`` (CSR rows stay sparse)."""
        if not self._linear():
            return super()._learn(X, labels, order)
        n_cols = self._W.shape[1]
        margins = np.empty((order.shape[0], n_cols), dtype=np.float64)
        radius = self.radius if self.radius is not None else 1.0 / np.sqrt(self.lambda_eff_)
        args = (
            np.ascontiguousarray(labels, dtype=np.float64),
            order,
            self._W,
            self._bias,
            self._counters,
            self._reals,
            self.lambda_eff_,
            float(self.eta),
            float(radius),
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
        """f(x) (see :meth:`BudgetedKernelModel.decision_function`); linear models: w·x (+ b)."""
        if not self._linear():
            return super().decision_function(X)
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        out = linear_decision(X, self._W, self._bias, self._reals[R_SCALE])
        return out[:, 0] if out.shape[1] == 1 else out

    def _add_class_arrays(self):
        k = self.classes_.shape[0]
        super()._add_class_arrays()
        if self._linear():  # binary w → (−w/2, w/2, 0), as the coefficients
            W = np.zeros((self._W.shape[0], k + 1))
            if k == 2:
                W[:, 0], W[:, 1] = -0.5 * self._W[:, 0], 0.5 * self._W[:, 0]
            else:
                W[:, :k] = self._W
            self._W = W

    def _grow_arrays(self, d_new):
        super()._grow_arrays(d_new)
        if self._linear():
            W = np.zeros((d_new, self._W.shape[1]))
            W[: self._W.shape[0]] = self._W
            self._W = W
            self._idx_buf = np.zeros(d_new, dtype=np.int32)

    @property
    def coef_(self):
        """``kernel="linear"``: the weights, (1, d) binary or (n_classes, d): w = scale · W
        (AttributeError for ``kernel="rbf"``)."""
        if not self._linear():
            raise AttributeError("coef_ exists for linear models only (PegasosClassifier)")
        check_is_fitted(self, "classes_")
        return (self._reals[R_SCALE] * self._W).T.copy()

    def statistics(self):
        """:meth:`BudgetedKernelModel.statistics`; linear models: no support vectors, no budget
        (``budget`` None, ``kernel``, ``n_weights`` = d · K)."""
        out = super().statistics()
        if self._linear():
            out.update(kernel="linear", budget=None, n_weights=int(self._W.size))
        return out

    def get_state(self):
        arrays, meta = super().get_state()
        if self._linear():
            arrays.update(pack_weights(self._W))
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        est = super().from_state(arrays, meta)
        if est._linear():
            est._W = unpack_weights(arrays, est._W.shape)
        return est

    def _apply(self, X, labels, order, margins):
        """BSGD steps over ``X[order]``: dense X (n, d), or CSR arrays for sparse SVs."""
        maintenance, scratch = self._maintenance_config(), self._scratch()

        def step(order_part, margins_part, pool):
            return self._bsgd_call(X, labels, order_part, pool, maintenance, scratch, margins_part)

        if self._sparse_svs():
            run_with_room(step, X, order, margins, self)
        else:
            step(order, margins, self._sv_t)

    def _bsgd_call(self, X, labels, order, pool, maintenance, scratch, margins):
        radius = self.radius if self.radius is not None else 1.0 / np.sqrt(self.lambda_eff_)
        return bsgd_steps(
            X,
            labels,
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
