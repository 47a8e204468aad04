"""scikit-learn estimators for budgeted kernel SVMs trained online.

:class:`BudgetedSGDClassifier` wraps the numba BSGD step (:mod:`svmstream.solvers.budgeted._bsgd`): it owns
parameter validation, label mapping, densification of sparse input, the epoch loop and the
exact save/restore of the whole learner state.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import (
    BUDGET_MIN,
    C_MAX,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    REFERENCE_N,
    SPARSE_MIN_FEATURES,
    check_choice,
    check_positive,
)
from ..calibration import MarginCalibrator
from ._decision import dense_decision, rbf_decision_batch
from ._linear import linear_model_bytes
from ._lookup import merge_tables
from ._maintenance import Maintenance, Scratch
from ._merging import N_DIAG
from ._preprocessing import buffer_capacity, csr_arrays, guard_capacity, scale_gamma, scale_gamma_sparse
from ._publish import published_copy
from ._rehearsal import memory_capacity
from ._sparse_pool import SV_NNZ_BOUND, new_arena, resolve_sv_storage, sparse_model_bytes
from ._state import (
    C_MAINTENANCE,
    C_MERGES,
    C_N_SV,
    C_SCHED_SHIFT,
    C_STEPS,
    C_VIOLATIONS,
    N_COUNTERS,
    N_REALS,
    R_MERGE_SECONDS,
    R_NORM2,
    R_SCALE,
    R_WD_SUM,
)

#: Sparse input is densified this many matrix elements at a time.
DENSE_CHUNK_ELEMENTS = 4_000_000
#: :meth:`BudgetedKernelModel.restart_schedule` (the drift stage's reset,
#: :mod:`svmstream.solvers.online.stages.drift`): the schedule restarts at this t (Pegasos: η = 1/(λ t0)), so
#: the old model weighs like t0 examples and fades as t0 / (t0 + m) over the next m steps; a
#: detection before t0 steps leaves the schedule alone.  t0 = REFERENCE_N (30,000, the n of the
#: default λ): on the flipped-ijcnn1 benchmark recovery is the same for t0 = 100 … 30,000 (it is
#: the detection delay and the dropped shuffle buffer that matter), while on ijcnn1 in file order
#: without a buffer, where the error rate rises in places and ADWIN fires 4 times before t =
#: 27,000, t0 = 1,000 cost 4.6 pp of test accuracy, 10,000 cost 1.9 pp and 30,000 nothing
#: (``benchmarks/bench_drift_t0.py``).
DRIFT_RESET_T0 = REFERENCE_N


def resolve_lambda(lambda_, C, n_samples, n_rows=None):
    """Regularisation λ: ``lambda_`` if given, else ``1 / (C · n)``.

    ``n`` is ``n_samples`` when set, else ``n_rows`` (the rows of :meth:`fit`), else — a
    stream of unknown length — :data:`~svmstream.solvers._params.REFERENCE_N`, so that λ
    never depends on how a stream is cut into batches.  C = 1/(nλ) is the usual SVM
    relation (Wang et al. 2012, §2).

    Raises
    ------
    ValueError
        If the resulting λ is not a positive finite number.
    """
    if lambda_ is not None:
        lam = float(lambda_)
    else:
        n = n_samples if n_samples is not None else (n_rows if n_rows is not None else REFERENCE_N)
        lam = 1.0 / (float(C) * float(n))
    if not np.isfinite(lam) or lam <= 0.0:
        raise ValueError(f"regularisation lambda must be positive and finite, got {lam!r}")
    if lam < LAMBDA_MIN:
        raise ValueError(
            f"regularisation lambda must be >= {LAMBDA_MIN:g} (smaller values overflow the step size "
            f"1/(lambda t)), got {lam!r}"
        )
    return lam


def window_bytes(warmup, n_features):
    """Bytes of a warm-up window when full: ``warmup`` rows of ``n_features`` values and a label,
    8 bytes each; rows wider than 256 features by their nonzeros (at most 2,048 of 12 bytes, the
    bound of sparse support vectors).  :func:`model_bytes` does not count it (the window holds
    the raw rows as received until it closes)."""
    d = max(1, int(n_features))
    if d > SPARSE_MIN_FEATURES:  # wide rows: counted by their nonzeros, as sparse support vectors are
        return int(warmup) * (min(d, SV_NNZ_BOUND) * 12 + 8)
    return int(warmup) * (d + 1) * 8


def model_bytes(
    budget,
    n_features,
    shuffle_buffer=0,
    run_guard=False,
    n_classes=2,
    maintenance="merge",
    kernel="rbf",
    sv_storage="dense",
    rehearsal_memory=0,
):
    """Bytes of the dense arrays a budgeted model of this shape allocates (an estimate made
    before any allocation): the SV matrix (B + 1) · d · 8, the shuffle buffer (at most
    64 MiB of rows), the run guard's reservoirs (at most 16 MiB), and K⁻¹ for
    ``maintenance="project"``.  The warm-up window (raw rows as received) is not counted.
    ``kernel="linear"``: :func:`._linear.linear_model_bytes` (no SVs: d · K · 8 of weights).
    ``sv_storage="sparse"``, or "auto" with d > 256 (where "auto" may choose sparse SVs):
    :func:`._sparse_pool.sparse_model_bytes` (SVs bounded by their nonzeros, not by d).
    ``rehearsal_memory``: rows remembered for rehearsal (0 when rehearsal is off), at most
    16 MiB (:func:`._rehearsal.memory_capacity`)."""
    if kernel == "linear":
        return linear_model_bytes(n_features, shuffle_buffer, run_guard, n_classes)
    if sv_storage == "sparse" or (sv_storage == "auto" and int(n_features) > SPARSE_MIN_FEATURES):
        return sparse_model_bytes(budget, n_features, shuffle_buffer, run_guard, n_classes, maintenance)
    d = max(1, int(n_features))
    cap = int(budget) + 1
    n_cols = 1 if n_classes == 2 else int(n_classes)
    total = cap * d * 8 + cap * 8 * (2 + n_cols)  # SVs; their norms, coefficients, kernel row
    total += buffer_capacity(int(shuffle_buffer), d) * (d + 1) * 8
    if run_guard:
        total += guard_capacity(n_classes, d) * n_classes * d * 8
    if maintenance == "project":
        total += cap * cap * 8
    total += memory_capacity(int(rehearsal_memory), d) * (d + 2) * 8
    return int(total)


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
        yield (
            np.ascontiguousarray(X[rows].toarray(), dtype=np.float64),
            np.arange(rows.shape[0], dtype=np.int64),
        )


def _already_valid(X, est) -> bool:
    """True when ``validate_data(est, X, reset=False)`` would return ``X`` itself without a
    warning: an exact ndarray, 2-D, float64, C-contiguous, at least one row, the fitted
    width, finite, and an estimator fitted without feature names."""
    return (
        type(X) is np.ndarray
        and X.ndim == 2
        and X.dtype == np.float64
        and X.flags.c_contiguous
        and X.shape[0] > 0
        and X.shape[1] > 0
        and X.shape[1] == getattr(est, "n_features_in_", -1)
        and not hasattr(est, "feature_names_in_")
        and bool(np.isfinite(X).all())
    )


_NO_TABLE = np.zeros((2, 2))
#: Settings of the stages that left the engines; states saved before hold them in ``params``.
PIPELINE_PARAMS = ("on_drift", "rehearsal", "rehearsal_memory")
#: Settings of the scaler and order stages, which the engines ran until state version 7 (their
#: states hold them in ``params``; :mod:`svmstream.solvers.online.stages.scaler`, ``.order``).
LEGACY_STAGE_PARAMS = ("scaling", "warmup", "shuffle_buffer", "run_guard")


class WarmingUp(NotFittedError):
    """Raised by ``decision_function``/``predict`` while the warm-up window is still open.

    The message says how many of the ``warmup`` examples have arrived.  A subclass of
    scikit-learn's ``NotFittedError`` (hence of ``ValueError`` and ``AttributeError``).
    """


class BudgetedKernelModel(ClassifierMixin, BaseEstimator):
    #: True for the binary models inside a one-vs-rest BSCA model: the parent calibrates
    #: for all of them
    _ovr_child = False
    #: False inside a streaming pipeline, whose calibration stage calibrates instead
    #: (``calibrator_`` is None then)
    _calibrates = True

    """Shared state and prediction of budgeted Gaussian-kernel classifiers (BSGD, BSCA).

    Holds the SV matrix (capacity B + 1), coefficients (one column per class, or a single
    column for binary problems), bias, counters and RNG; provides ``decision_function``,
    ``predict``, the statistics and the exact ``get_state``/``from_state`` round trip.
    Subclasses implement the learning step (``_apply``) and parameter checks.
    """

    #: bumped whenever the saved layout changes (3: warm-up window, scaler, shuffle buffer;
    #: 4: run guard, buffer that learns while it fills; 5: calibrator, drift detector, schedule
    #: shift; 6: ``sv_storage`` — sparse SVs saved as compact CSR ``sv_data``/``sv_idx``/``sv_len``;
    #: 7: the same layout, saved under the engine's or the plain estimator's name — states of
    #: version <= 6 named ``BudgetedSGDClassifier``/``BudgetedSCAClassifier`` carried the stages
    #: and load as a ``StreamingClassifier``, :func:`svmstream.solvers.online.pipeline.legacy_state`;
    #: 8: no scaler, window, buffer or guard (the pipeline's scaler and order stages): ``gamma``
    #: and ``pool`` in the meta; older states' ``preprocessing`` gives γ)
    STATE_VERSION = 8
    #: versions :meth:`from_state` still loads (2: raw features; 3: no run guard; 4: no
    #: calibration or drift state — they start fresh; 5: dense SVs, ``sv_storage_ = "dense"``)
    STATE_VERSIONS = (2, 3, 4, 5, 6, 7, 8)
    #: The rehearsal stage (:mod:`svmstream.solvers.online.stages.rehearsal`) a pipeline hands
    #: its engine: :meth:`_learn_fed` lets it plan and learn the rows released (None: no rehearsal)
    _rehearsal = None

    def engine_params(self):
        """The parameters of the engine of this estimator's family (``get_params()``)."""
        return self.get_params()

    @classmethod
    def from_params(cls, params):
        """An unfitted estimator from saved parameters (the settings of the stages that left
        the engines — ``on_drift``, ``rehearsal``, ``rehearsal_memory``, ``scaling``, ``warmup``,
        ``shuffle_buffer``, ``run_guard`` — belong to the pipeline and are dropped)."""
        params = {k: v for k, v in params.items() if k not in PIPELINE_PARAMS + LEGACY_STAGE_PARAMS}
        return cls(**params)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        # the parameter ``lambda_`` ends in "_", which sklearn's default test would take
        # for a fitted attribute
        return hasattr(self, "classes_")

    def __setstate__(self, state):
        # unpickled arrays may be read-only (e.g. memory-mapped); the learner writes in place
        super().__setstate__(state)
        for key, value in vars(self).items():
            if isinstance(value, np.ndarray) and not value.flags.writeable:
                setattr(self, key, value.copy())

    # ------------------------------------------------------------------ labels
    def _encode_labels(self, y):
        """Labels → float64: ±1 for binary models, class index for multi-class models.

        Raises ValueError naming the first unknown label."""
        y = np.asarray(y)
        index = np.searchsorted(self.classes_, y)
        index[index >= self.classes_.shape[0]] = 0
        known = self.classes_[index] == y
        if not known.all():
            bad = int(np.flatnonzero(~known)[0])
            label = y[bad].item() if isinstance(y[bad], np.generic) else y[bad]
            raise ValueError(f"y[{bad}]: unknown label {label!r}; classes are {self.classes_.tolist()}")
        if self.classes_.shape[0] == 2:
            return np.where(index == 1, 1.0, -1.0)
        return index.astype(np.float64)

    # ------------------------------------------------------------------ state
    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True):
        classes = np.unique(np.asarray(classes))
        if classes.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; "
                f"got {classes.shape[0]} class: {classes.tolist()}"
            )
        self.classes_ = classes
        self.n_features_in_ = int(n_features)
        self.lambda_eff_ = self._resolve_lambda(n_rows)
        n_cols = 1 if classes.shape[0] == 2 else classes.shape[0]
        self._alloc_sv_arrays(0, n_cols)  # the SV pool waits for the first step (_ensure_pool)
        self._pool_pending = True
        self._bias = np.zeros(n_cols, dtype=np.float64)
        self._counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self._reals = np.zeros(N_REALS, dtype=np.float64)
        self._reals[R_SCALE] = 1.0
        self._x_buf = np.zeros(self.n_features_in_, dtype=np.float64)
        self._f_buf = np.zeros(n_cols, dtype=np.float64)
        self.merge_diagnostics_ = np.zeros(N_DIAG, dtype=np.float64)
        self.rng_ = np.random.default_rng(self.random_state)
        self.gamma_ = self._given_gamma()
        self._new_calibrator()
        if not streaming or ready:
            self._ensure_pool()
        self.last_margins_ = np.zeros((0,) if n_cols == 1 else (0, n_cols))
        self.last_y_ = self.classes_[:0]

    def _sv_capacity(self):
        """Columns of the SV matrix: B + 1 (a linear BSGD model has none)."""
        return int(self.budget) + 1

    def _alloc_sv_arrays(self, cap, n_cols):
        """The arrays with one slot per SV (``cap`` slots): the pool, ``_sv_sq``, ``_coef``
        (cap, n_cols), ``_k_inv`` (projection), the kernel-row scratch ``_row_buf`` (2 cap)."""
        self._alloc_pool(cap)
        self._sv_sq = np.zeros(cap, dtype=np.float64)
        self._coef = np.zeros((cap, n_cols), dtype=np.float64)
        self._k_inv = np.zeros((cap, cap) if self.maintenance == "project" else (1, 1))
        self._row_buf = np.zeros(2 * cap, dtype=np.float64)  # kernel row; merging uses both halves

    def _ensure_pool(self):
        """Allocate the SV pool (B + 1 slots) if it is still pending: a streaming model gets it
        at its first learning step, so a model whose warm-up window is still open (no SV can
        exist yet) holds no (d, B + 1) matrix — 24 KB at d = 6, B = 500, per idle model.  Where
        the pool is allocated does not change what it learns."""
        if self.__dict__.get("_pool_pending"):
            self._alloc_sv_arrays(self._sv_capacity(), self._coef.shape[1])
            self._pool_pending = False

    # ------------------------------------------------------------------ SV storage
    def _resolve_sv_storage(self, X, scaling="none"):
        """Fix ``sv_storage_`` ("dense"/"sparse") from ``sv_storage``, the first input X and the
        ``scaling`` it will have (a pipeline's scaler stage; :func:`._sparse_pool.resolve_sv_storage`;
        raises ValueError naming ``sv_storage``)."""
        self.sv_storage_ = resolve_sv_storage(self.sv_storage, X, scaling)

    def _sparse_svs(self):
        return getattr(self, "sv_storage_", "dense") == "sparse"

    def _alloc_pool(self, cap):
        """The SV pool of ``cap`` slots (:mod:`._sparse_pool`): a dense (d, cap) ``_sv_t``, or for
        sparse storage an empty ``_sv_t`` and the arena ``_sv_data``/``_sv_idx`` with the slot
        arrays ``_sv_start``/``_sv_len``, the fill mark ``_sv_used`` and the (d,) ``_sv_scratch``."""
        if not hasattr(self, "sv_storage_"):
            self.sv_storage_ = "sparse" if self.sv_storage == "sparse" else "dense"
        if not self._sparse_svs():
            self._sv_t = np.zeros((self.n_features_in_, cap), dtype=np.float64)
            return
        self._sv_t = np.zeros((0, 0))
        self._sv_data, self._sv_idx = new_arena(16 * cap)
        self._sv_start = np.zeros(cap, dtype=np.int64)
        self._sv_len = np.zeros(cap, dtype=np.int64)
        self._sv_used = np.zeros(1, dtype=np.int64)
        self._sv_scratch = np.zeros(self.n_features_in_, dtype=np.float64)

    def _pool(self, scratch=None):
        """The pool argument of the numba kernels: ``_sv_t``, or the sparse tuple (with
        ``scratch`` instead of the learner's own for a concurrent prediction)."""
        if not self._sparse_svs():
            return self._sv_t
        return (
            self._sv_data,
            self._sv_idx,
            self._sv_start,
            self._sv_len,
            self._sv_used,
            self._sv_scratch if scratch is None else scratch,
        )

    def _csr_input(self, X):
        """CSR arrays ``(data, indices int32, indptr int64)`` of rows X (dense rows converted)."""
        return csr_arrays(X if sp.issparse(X) else sp.csr_matrix(np.asarray(X, dtype=np.float64)))

    @property
    def sv_nonzeros_(self):
        """Nonzeros stored for the live SVs (sparse storage), or n_sv · d (dense)."""
        n = self.n_support_vectors_
        if self._sparse_svs():
            return int(self._sv_len[:n].sum())
        return int(n * self.n_features_in_)

    def _new_calibrator(self):
        """A fresh probability calibrator (:class:`~svmstream.solvers.calibration.MarginCalibrator`),
        None inside a streaming pipeline (its calibration stage calibrates)."""
        self.calibrator_ = MarginCalibrator(self.classes_.shape[0]) if self._calibrates else None

    def _given_gamma(self):
        """``gamma`` as a number, or None when it is ``"scale"`` (resolved from the first data,
        :meth:`_resolve_gamma`) or the model has no kernel."""
        return None if (self._linear() or isinstance(self.gamma, str)) else float(self.gamma)

    def _resolve_gamma(self, X):
        """``gamma="scale"``: γ = 1 / (d · Var(X)) over all entries of the first data seen
        (scikit-learn's ``SVC(gamma="scale")``; CSR rows from their nonzeros), once."""
        if self.gamma_ is None and not self._linear():
            self.gamma_ = scale_gamma_sparse(X) if sp.issparse(X) else scale_gamma(X)

    def use_gamma(self, gamma):
        """Take γ resolved outside (the streaming pipeline's scaler stage, from its window)
        before the first learning step; returns self."""
        if not self._linear():
            self.gamma_ = float(gamma)
        return self

    def _linear(self):
        """``kernel="linear"`` (BSGD only: BSCA has no ``kernel``)."""
        return getattr(self, "kernel", "rbf") == "linear"

    def _resolve_lambda(self, n_rows):
        return resolve_lambda(self.lambda_, self.C, self.n_samples, n_rows)

    #: No hidden scaling: the estimator learns the features as given (the pipeline's scaler
    #: stage scales, :mod:`svmstream.solvers.online.stages.scaler`).
    scaling_ = "none"
    #: Every example given is learned at once (the pipeline's window and buffer hold examples).
    n_pending_ = 0
    warming_up_ = False

    def _tables(self):
        """The merge lookup tables ``(H, W)`` if a lookup solver is in use, else 2×2 dummies."""
        if {self.merge_solver, self.compare_merge_solver} & {"lookup-h", "lookup-wd"}:
            return merge_tables()
        return _NO_TABLE, _NO_TABLE

    def _compare_solver_code(self):
        """Merge-solver code of ``compare_merge_solver`` (−1: no side-by-side comparison)."""
        return -1 if self.compare_merge_solver is None else MERGE_SOLVERS[self.compare_merge_solver]

    def _maintenance_config(self):
        """The budget-maintenance settings as the numba steps take them (:class:`._maintenance.Maintenance`)."""
        h_table, wd_table = self._tables()
        return Maintenance(
            code=MAINTENANCE[self.maintenance],
            merge_solver=MERGE_SOLVERS[self.merge_solver],
            gss_eps=float(self.gss_eps),
            h_table=h_table,
            wd_table=wd_table,
            ref_solver=self._compare_solver_code(),
            diag=self.merge_diagnostics_,
        )

    def _scratch(self):
        """The steps' work arrays as one :class:`._maintenance.Scratch` (``_x_buf``, ``_row_buf``)."""
        return Scratch(x_buf=self._x_buf, row_buf=self._row_buf)

    def _check_budget_params(self):
        """Validate the parameters every budgeted model has; raises ValueError."""
        if not (isinstance(self.gamma, str) and self.gamma == "scale"):
            check_positive("gamma", self.gamma)
            if not np.isfinite(self.gamma):
                raise ValueError(f"gamma must be finite, got {self.gamma!r}")
        check_positive("C", self.C)
        if self.C > C_MAX:
            raise ValueError(f"C must be <= {C_MAX:g} (larger values overflow the step size), got {self.C!r}")
        check_positive("epochs", self.epochs, numbers.Integral)
        check_positive("lambda_", self.lambda_, allow_none=True)
        check_positive("n_samples", self.n_samples, numbers.Integral, allow_none=True)
        if not isinstance(self.budget, numbers.Integral) or self.budget < BUDGET_MIN:
            raise ValueError(f"budget must be an integer >= {BUDGET_MIN}, got {self.budget!r}")
        if not 0.0 < self.gss_eps < 1.0:
            raise ValueError(f"gss_eps must be in (0, 1), got {self.gss_eps!r}")
        check_choice("maintenance", self.maintenance, MAINTENANCE)
        resolve_sv_storage(self.sv_storage, None, "none")  # names sv_storage if it cannot be
        check_choice("merge_solver", self.merge_solver, MERGE_SOLVERS)
        if self.compare_merge_solver is not None:
            check_choice("compare_merge_solver", self.compare_merge_solver, MERGE_SOLVERS)

    def _validate_X(self, X, reset):
        if not reset and _already_valid(X, self):
            # scikit-learn's validate_data costs ~55 us a call (feature-name and dataframe
            # probes), 2/3 of a single-row decision_function (83 us -> 25 us measured): an
            # array it would return unchanged skips it; anything else still goes through it
            return X
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset)
        return X if sp.issparse(X) else np.ascontiguousarray(X)

    def _learn(self, X, labels, order):
        """Run the learning step over ``X[order]`` chunk by chunk (sparse SVs: CSR rows, in one
        piece); returns f before each step."""
        self._ensure_pool()
        margins = np.empty((order.shape[0], self._coef.shape[1]), dtype=np.float64)
        if self._sparse_svs():
            self._apply(self._csr_input(X), labels, order, margins)
            self.last_margins_ = margins[:, 0] if margins.shape[1] == 1 else margins
            return self.last_margins_
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            if X_part is X:
                y_part = labels
            else:
                y_part = labels[order[done : done + local_order.shape[0]]]
            self._apply(X_part, y_part, local_order, margins[done : done + local_order.shape[0]])
            done += local_order.shape[0]
        self.last_margins_ = margins[:, 0] if margins.shape[1] == 1 else margins
        return self.last_margins_

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, callback=None):
        """Train from scratch for ``epochs`` shuffled passes.

        X : (n, d) array-like or scipy sparse; y : (n,) labels, at least two classes.
        ``callback(estimator, epoch)``, if given, is called after each epoch (monitoring).
        Raises ValueError on invalid parameters, non-finite input or mismatched lengths.
        """
        self.check_params()
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=True)
        check_classification_targets(y)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        self._resolve_sv_storage(X)
        self._init_state(X.shape[1], np.unique(y), X.shape[0], streaming=False)
        labels = self._encode_labels(y)
        self._resolve_gamma(X)  # fit sees all its data: gamma="scale" from all of X
        self._fit_epochs(X, labels, callback)
        return self

    def _fit_epochs(self, X, labels, callback=None):
        for epoch in range(int(self.epochs)):
            order = self.rng_.permutation(X.shape[0]).astype(np.int64)
            margins = self._learn(X, labels, order)
            if callback is not None:
                callback(self, epoch + 1)
        # probabilities: calibrated on the last epoch's margins, each taken before its step
        if self.calibrator_ is not None:
            self.calibrator_.fit(margins, self._class_index(labels[order]))

    def partial_fit(self, X, y, classes=None):
        """Apply one learning step per row of X, in order.

        ``classes`` (all labels) is required on the first call.  Raises ValueError on
        non-finite input, a feature count different from the first call, or an unknown
        label; the model is unchanged in that case.
        """
        first = not hasattr(self, "classes_")
        if first:
            self.check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        X = X if sp.issparse(X) else np.ascontiguousarray(X)
        if first:
            self._resolve_sv_storage(X)
            self._init_state(X.shape[1], classes)
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {list(classes)} differ from the first call's {self.classes_.tolist()}")
        labels = self._encode_labels(y)
        self._resolve_gamma(X)  # gamma="scale": from the first batch
        self._learn_fed((X, labels, np.ones(labels.shape[0], dtype=bool)))
        return self

    def learn_rows(self, fed):
        """Learn rows released by a pipeline's order stage: ``fed`` = ``(X, labels, original)``
        — X (m, d) dense or CSR, already scaled; labels (m,) encoded (±1 binary, class index
        otherwise); original (m,) bool, False for the run guard's replayed rows — or None
        (nothing released).  Returns self."""
        self._learn_fed(fed)
        return self

    def flush(self):
        """Nothing is pending in an estimator (every row given is learned at once); kept for the
        streaming API: ``last_margins_``/``last_y_`` are emptied.  Returns self."""
        check_is_fitted(self, "classes_")
        self._learn_fed((np.zeros((0, self.n_features_in_)), np.zeros(0), np.zeros(0, dtype=bool)))
        return self

    def grow_features(self, n_features):
        """Widen the model to ``n_features`` input features (sparse input whose largest index
        grew; a missing feature is a zero).  Returns self.

        Support vectors (and remembered rows) get zeros in the new features; everything else
        is kept, so decisions on rows that are zero in the new features do not change.
        ``n_features`` below ``n_features_in_`` raises ValueError.
        """
        check_is_fitted(self, "classes_")
        d_old, d_new = self.n_features_in_, int(n_features)
        if d_new < d_old:
            raise ValueError(f"n_features must be >= the model's {d_old}, got {n_features!r}")
        if d_new == d_old:
            return self
        self._grow_arrays(d_new)
        if self._rehearsal is not None:
            self._rehearsal.widen(d_new)
        self._learn_fed(None)
        return self

    def _grow_arrays(self, d_new):
        if self._sparse_svs():  # stored indices stay valid: only the scatter vectors widen
            self._sv_scratch = np.zeros(d_new)
            self._x_buf = np.zeros(d_new)
            self.n_features_in_ = d_new
            return
        sv_t = np.zeros((d_new, self._sv_t.shape[1]))
        sv_t[: self._sv_t.shape[0]] = self._sv_t
        self._sv_t = sv_t
        self._x_buf = np.zeros(d_new)
        self.n_features_in_ = d_new

    def _learn_fed(self, fed):
        """Learn the rows the preprocessor released (None: none yet), each followed by
        ``rehearsal`` steps on remembered examples (the rehearsal stage, if any), record the
        originals and feed their margins to the calibrator (:meth:`_calibrate`)."""
        if fed is None:
            self._learned(None, np.zeros(0))
            return
        X, labels, original = fed
        if self._rehearsal is not None and self._rehearsal.applies(self, X):
            margins = self._rehearsal.learn(self, X, labels)
        else:
            margins = self._learn(X, labels, np.arange(X.shape[0], dtype=np.int64))
        self._calibrate(margins[original], labels[original])
        self._learned(margins[original], labels[original])

    # ------------------------------------------------------------------ rehearsal
    def _learn_plan(self, X_ext, y_ext, order, memory, gather):
        """Learn ``X_ext[order]``; returns ``(margins, α of the extended rows or None)``
        (BSCA overrides it to revisit the remembered rows' dual variables)."""
        return self._learn(X_ext, y_ext, order), None

    def _class_index(self, labels):
        """Encoded labels (±1 binary, index otherwise) → class indices (n,) int64."""
        if self.classes_.shape[0] == 2:
            return (np.asarray(labels) > 0).astype(np.int64)
        return np.asarray(labels).astype(np.int64)

    def _calibrate(self, margins, labels):
        """Feed the prequential margins of received examples to the calibrator (none inside a
        pipeline or a one-vs-rest parent's binary model)."""
        if margins.shape[0] == 0 or self._ovr_child or self.calibrator_ is None:
            return
        self.calibrator_.update(margins, self._class_index(labels))

    def restart_schedule(self, t0=None):
        """Restart the step-size schedule (:meth:`_reset_schedule`) at t = ``t0`` (None:
        :data:`DRIFT_RESET_T0`; an int >= 1) and empty the rehearsal memory (its rows hold the
        old concept; they were learned already): what the drift stage asks for after a
        detection (:mod:`svmstream.solvers.online.stages.drift`), and a warm-started drift
        challenger (:mod:`svmstream.solvers.online.warm`).  Nothing received is dropped.
        Returns self."""
        check_is_fitted(self, "classes_")
        self._reset_schedule(DRIFT_RESET_T0 if t0 is None else int(t0))
        if self._rehearsal is not None:
            self._rehearsal.clear()
        return self

    def _reset_schedule(self, t0=DRIFT_RESET_T0):
        """Restart the step-size schedule at t = ``t0`` (the step count ``t_`` is kept; the
        kernels read t − shift)."""
        self._counters[C_SCHED_SHIFT] = max(0, int(self._counters[C_STEPS]) - t0)

    def _learned(self, margins, labels):
        """Record the examples a call learned: ``last_margins_`` (f before each step, None:
        nothing learned) and ``last_y_`` (their labels, from ``classes_``)."""
        if margins is None:
            n_cols = self._coef.shape[1]
            margins = np.zeros((0,) if n_cols == 1 else (0, n_cols))
        self.last_margins_ = margins
        index = (labels > 0).astype(np.intp) if self.classes_.shape[0] == 2 else labels.astype(np.intp)
        self.last_y_ = self.classes_[index]

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """f(x) = Σ_j α_j k(sv_j, x) (+ b): (n,) float64 for binary models (positive side =
        ``classes_[1]``), (n, n_classes) float64 for multi-class models."""
        check_is_fitted(self, "classes_")
        X = self._validate_X(X, reset=False)
        out = np.empty((X.shape[0], self._coef.shape[1]), dtype=np.float64)
        row_buf = np.empty_like(self._row_buf)  # own scratch: concurrent predictions are safe
        if self._sparse_svs():
            pool = self._pool(np.zeros(self.n_features_in_))  # own scatter vector, likewise
            args = (self._sv_sq, self._coef, self._bias, self.n_support_vectors_, self.gamma_)
            rbf_decision_batch(self._csr_input(X), pool, *args, float(self._reals[R_SCALE]), out, row_buf)
            return out[:, 0] if out.shape[1] == 1 else out
        chunk_rows = max(1, DENSE_CHUNK_ELEMENTS // max(1, X.shape[1]))
        order = np.arange(X.shape[0], dtype=np.int64)
        done = 0
        for X_part, local_order in iter_dense_rows(X, order, chunk_rows):
            part = out[done : done + local_order.shape[0]]
            dense_decision(  # per-row kernel for small batches, BLAS blocks and threads for large
                X_part,
                self._sv_t,
                self._sv_sq,
                self._coef,
                self._bias,
                self.n_support_vectors_,
                self.gamma_,
                float(self._reals[R_SCALE]),
                part,
                row_buf,
            )
            done += local_order.shape[0]
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """Predicted labels (n,) from ``classes_``."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """Calibrated class probabilities, (n, n_classes) float64, columns in ``classes_``
        order, rows summing to 1; ``argmax`` of a row is always the label :meth:`predict`
        gives.

        The calibration (:class:`~svmstream.solvers.calibration.MarginCalibrator`: a
        slope/temperature on the decision values) is learned online from the margins the
        learner computes before each step (prequential), refitted on a sliding window;
        :meth:`fit` calibrates on its last epoch's margins.  Raises like :meth:`decision_function`.
        """
        decision = self.decision_function(X)  # raises NotFittedError before fit
        return self.calibrator_.predict_proba(decision)

    def add_class(self, label):
        """Add a class learned from the data (a label not seen before); returns self.

        ``label`` must sort after every class in ``classes_``, so existing classes keep
        their indices (the service passes class indices 0, 1, 2, … in order of first
        appearance).  The new class starts with zero coefficients.  A binary model becomes
        a multi-class one: BSGD's single weight vector w becomes the Crammer–Singer
        columns (−w/2, w/2, 0), whose margin f_y − f_r equals the binary margin y·f, so
        its decisions do not change; BSCA becomes one-vs-rest with models (−w, w, 0).
        The calibrator grows with it (a pipeline's stages grow their own state).

        Raises
        ------
        ValueError
            If ``label`` does not sort after ``classes_[-1]``.
        """
        check_is_fitted(self, "classes_")
        if not np.asarray(label) > self.classes_[-1]:
            raise ValueError(
                f"a new class must sort after the model's classes {self.classes_.tolist()}, got {label!r}"
            )
        self._add_class_arrays()
        self.classes_ = np.append(self.classes_, label)
        if self.calibrator_ is not None:
            self.calibrator_.add_class()
        n_cols = self.classes_.shape[0]
        self.last_margins_ = np.zeros((0, n_cols))
        self.last_y_ = self.classes_[:0]
        return self

    def _add_class_arrays(self):
        """Grow the coefficient columns by one class (see :meth:`add_class`)."""
        cap, k = self._coef.shape[0], self.classes_.shape[0]
        coef = np.zeros((cap, k + 1))
        bias = np.zeros(k + 1)
        if k == 2:  # binary w → Crammer–Singer (−w/2, w/2, 0): same margins and decisions
            coef[:, 0], coef[:, 1] = -0.5 * self._coef[:, 0], 0.5 * self._coef[:, 0]
            bias[0], bias[1] = -0.5 * self._bias[0], 0.5 * self._bias[0]
            self._reals[R_NORM2] *= 0.5  # ‖w/2‖² twice
        else:
            coef[:, :k] = self._coef
            bias[:k] = self._bias
        self._coef, self._bias = coef, bias
        self._f_buf = np.zeros(k + 1)

    # ------------------------------------------------------------------ publishing
    def published_copy(self):
        """A read-only copy for predictions that shares what the learner never rewrites
        (O(d · n_sv) dense, O(B) sparse; not the buffers): :func:`._publish.published_copy`."""
        return published_copy(self)

    # ------------------------------------------------------------------ statistics
    @property
    def n_support_vectors_(self):
        return int(self._counters[C_N_SV])

    @property
    def t_(self):
        """Learning steps taken, including the run guard's replayed examples (``n_replayed_``)."""
        return int(self._counters[C_STEPS])

    #: The run guard and drops at drifts are the pipeline's (its order stage counts them).
    n_replayed_ = 0
    n_discarded_ = 0

    @property
    def n_seen_(self):
        """Examples learned: ``t_`` − ``n_rehearsed_`` (inside a pipeline the run guard's replayed
        rows are steps too; the pipeline counts what it received)."""
        return int(self._counters[C_STEPS]) - self.n_rehearsed_

    @property
    def n_rehearsed_(self):
        """Rehearsal steps taken (each one a learning step counted in ``t_``)."""
        return self._rehearsal.steps if self._rehearsal is not None else 0

    @property
    def n_merges_(self):
        return int(self._counters[C_MERGES])

    @property
    def n_violations_(self):
        return int(self._counters[C_VIOLATIONS])

    @property
    def n_maintenance_(self):
        return int(self._counters[C_MAINTENANCE])

    @property
    def weight_degradation_total_(self):
        return float(self._reals[R_WD_SUM])

    @property
    def maintenance_seconds_(self):
        """Wall time spent in budget maintenance (only measured with ``profile=True``); for
        projection it includes the O(B²) update of K⁻¹ when an SV is added."""
        return float(self._reals[R_MERGE_SECONDS])

    @property
    def support_vectors_(self):
        """(n_sv, d) float64: a dense array, or a ``scipy.sparse.csr_matrix`` for sparse storage."""
        n = self.n_support_vectors_
        if self._sparse_svs():
            data, idx, lens = self._compact_svs()
            indptr = np.concatenate([[0], np.cumsum(lens)])
            return sp.csr_matrix((data, idx, indptr), shape=(n, self.n_features_in_))
        return self._sv_t[:, :n].T.copy()

    def _compact_svs(self):
        """The live sparse SVs as compact CSR pieces ``(data, indices int32, lengths int64)``."""
        n = self.n_support_vectors_
        starts, lens = self._sv_start[:n], self._sv_len[:n]
        pick = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        return self._sv_data[pick], self._sv_idx[pick], lens.copy()

    @property
    def dual_coef_(self):
        """Effective coefficients α: (n_sv,) for binary, (n_sv, n_classes) for multi-class."""
        coef = self._coef[: self.n_support_vectors_] * self._reals[R_SCALE]
        return coef[:, 0] if coef.shape[1] == 1 else coef

    @property
    def intercept_(self):
        return self._bias.copy()

    def statistics(self):
        """Budget statistics (the BSGD paper's Table 6 quantities) as a JSON-able dict."""
        steps = max(self.t_, 1)
        maint = self.n_maintenance_
        return {
            "n_support_vectors": self.n_support_vectors_,
            "budget": int(self.budget),
            "steps": self.t_,
            "examples_seen": self.n_seen_,
            "violations": self.n_violations_,
            "maintenance_events": maint,
            "merges": self.n_merges_,
            "merging_frequency": maint / steps,
            "average_weight_degradation": self.weight_degradation_total_ / maint if maint else 0.0,
            "sv_storage": getattr(self, "sv_storage_", None),
            "sv_nonzeros": self.sv_nonzeros_ if hasattr(self, "_sv_t") else 0,
            "rehearsal_steps": self.n_rehearsed_,
        }

    # ------------------------------------------------------------------ persistence
    def get_state(self):
        """Whole learner state as ``(arrays, meta)``; see :mod:`solvers.persistence`."""
        check_is_fitted(self, "classes_")
        n = self.n_support_vectors_
        arrays = {
            "classes": self.classes_.copy(),
            "sv_sq": self._sv_sq[:n].copy(),
            "coef": self._coef[:n].copy(),
            "bias": self._bias.copy(),
            "counters": self._counters.copy(),
            "reals": self._reals.copy(),
            "merge_diagnostics": self.merge_diagnostics_.copy(),
        }
        if self._sparse_svs():  # only the live SVs' nonzeros (state version 6)
            arrays["sv_data"], arrays["sv_idx"], arrays["sv_len"] = self._compact_svs()
        else:
            arrays["sv_t"] = self._sv_t[:, :n].copy()
        if self._k_inv.shape[0] > 1:
            arrays["k_inv"] = self._k_inv[:n, :n].copy()
        monitors = self._calibrator_state(arrays)
        meta = {
            **monitors,
            "gamma": self.gamma_,
            "pool": not self.__dict__.get("_pool_pending", False),
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": self.get_params(),
            "sv_storage": getattr(self, "sv_storage_", "dense"),
            "n_features_in": self.n_features_in_,
            "lambda_eff": self.lambda_eff_,
            "rng_state": self.rng_.bit_generator.state,
        }
        return arrays, meta

    def _load_sparse_svs(self, arrays, n):
        """Sparse SVs of a saved state into a fresh, compact arena (``used`` = their nonzeros;
        where the entries sit does not change the model).  Raises ValueError if they do not fit."""
        data, idx, lens = arrays["sv_data"], arrays["sv_idx"], np.asarray(arrays["sv_len"], dtype=np.int64)
        total = int(lens.sum()) if lens.size else 0
        if (
            n > self.budget
            or lens.shape != (n,)
            or data.shape != (total,)
            or idx.shape != (total,)
            or (total and (idx.min() < 0 or idx.max() >= self.n_features_in_))
        ):
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        self._sv_data, self._sv_idx = new_arena(2 * total + 16 * self._sv_start.shape[0])
        self._sv_data[:total], self._sv_idx[:total] = data, idx
        self._sv_start[:n] = np.concatenate([[0], np.cumsum(lens)[:-1]]) if n else lens
        self._sv_len[:n] = lens
        self._sv_used[0] = total

    def _calibrator_state(self, arrays):
        """Add the calibrator's arrays (prefixed ``cal__``) to ``arrays``; returns its meta
        (nothing when a pipeline's calibration stage calibrates)."""
        if self.calibrator_ is None:
            return {}
        cal_arrays, cal_meta = self.calibrator_.get_state()
        arrays.update({f"cal__{k}": v for k, v in cal_arrays.items()})
        return {"calibration": cal_meta}

    def _load_calibrator(self, arrays, meta):
        """Restore what :meth:`_calibrator_state` saved (a state without it starts fresh).  A
        drift detector saved by an engine that still carried the drift stage (``"drift"``,
        ``drift__*``) is the pipeline's to load (:mod:`svmstream.solvers.online.pipeline`)."""
        if "calibration" in meta and self.calibrator_ is not None:
            cal = {k[5:]: v for k, v in arrays.items() if k.startswith("cal__")}
            self.calibrator_ = MarginCalibrator.from_state(cal, meta["calibration"])

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild an estimator that continues exactly where :meth:`get_state` left off.

        Raises ValueError if the state's version or shapes do not fit."""
        version = meta.get("state_version")
        if version not in cls.STATE_VERSIONS:
            raise ValueError(f"unsupported {cls.__name__} state version {version}")
        est = cls.from_params(dict(meta["params"]))
        est.sv_storage_ = meta.get("sv_storage", "dense")  # version <= 5: dense SVs
        est._init_state(meta["n_features_in"], arrays["classes"], 1, ready=False)
        est._load_gamma(meta)
        if saved_pool(meta) or arrays["coef"].shape[0]:  # a model still warming up has no pool yet
            est._ensure_pool()
        est.lambda_eff_ = float(meta["lambda_eff"])
        n = arrays["coef"].shape[0]
        if est._sparse_svs():
            est._load_sparse_svs(arrays, n)
        elif n > est.budget or arrays["sv_t"].shape != (est.n_features_in_, n):
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        else:
            est._sv_t[:, :n] = arrays["sv_t"]
        if arrays["coef"].shape[1:] != est._coef.shape[1:]:
            raise ValueError("saved support vectors do not fit the saved budget/dimension/classes")
        est._sv_sq[:n] = arrays["sv_sq"]
        est._coef[:n] = arrays["coef"]
        est._bias[:] = arrays["bias"]
        est._counters[: arrays["counters"].shape[0]] = arrays["counters"]  # v4 and older: no shift
        est._reals[:] = arrays["reals"]
        est.merge_diagnostics_[:] = arrays["merge_diagnostics"]
        if "k_inv" in arrays:
            est._k_inv[:n, :n] = arrays["k_inv"]
        est.rng_.bit_generator.state = meta["rng_state"]
        est._load_calibrator(arrays, meta)  # a saved rehearsal memory ("rehearsal") is the pipeline's
        return est

    def _load_gamma(self, meta):
        """γ in use from a saved meta: ``gamma`` (version 8), or the preprocessing's (older)."""
        if "gamma" in meta:
            self.gamma_ = meta["gamma"]
        elif meta.get("preprocessing") is not None and not self._linear():
            self.gamma_ = meta["preprocessing"]["gamma"]


def saved_pool(meta) -> bool:
    """Whether a saved model had its SV pool (learning had started): ``pool`` (version 8), or
    its preprocessing was ready (older; version 2: always)."""
    if "pool" in meta:
        return bool(meta["pool"])
    pp = meta.get("preprocessing")
    return True if pp is None else bool(pp["ready"])
