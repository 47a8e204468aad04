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
from sklearn.utils.validation import validate_data

from .._params import (
    BUDGET_MIN,
    C_MAX,
    MAINTENANCE,
    MERGE_SOLVERS,
    check_choice,
    check_positive,
)
from ..calibration import MarginCalibrator
from ._learning import DRIFT_RESET_T0, Learning
from ._lookup import merge_tables
from ._maintenance import Maintenance, Scratch
from ._merging import N_DIAG
from ._persist import KernelModelState
from ._preprocessing import csr_arrays, scale_gamma, scale_gamma_sparse
from ._readout import Readout
from ._sizes import resolve_lambda
from ._sparse_pool import new_arena, resolve_sv_storage
from ._state import (
    N_COUNTERS,
    N_REALS,
    R_SCALE,
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
__all__ = [
    "DRIFT_RESET_T0",
    "LEGACY_STAGE_PARAMS",
    "PIPELINE_PARAMS",
    "BudgetedKernelModel",
    "WarmingUp",
    "resolve_lambda",
]

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


class BudgetedKernelModel(Learning, Readout, KernelModelState, ClassifierMixin, BaseEstimator):
    #: True for the binary models inside a one-vs-rest BSCA model: the parent calibrates
    #: for all of them
    _ovr_child = False

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
    def _init_state(self, n_features, classes, n_rows=None, streaming=True, ready=True, calibrate=True):
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
        self._new_calibrator(calibrate)
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

    def _new_calibrator(self, calibrate=True):
        """A fresh probability calibrator (:class:`~svmstream.solvers.calibration.MarginCalibrator`);
        ``calibrate`` False: none (``calibrator_`` None) -- the engine of a streaming pipeline,
        whose calibration stage calibrates (the pipeline starts its state so)."""
        self.calibrator_ = MarginCalibrator(self.classes_.shape[0]) if calibrate else None

    def _given_gamma(self):
        """``gamma`` as a number, or None when it is ``"scale"`` (resolved from the first data,
        :meth:`_resolve_gamma`)."""
        return None if isinstance(self.gamma, str) else float(self.gamma)

    def _resolve_gamma(self, X):
        """``gamma="scale"``: γ = 1 / (d · Var(X)) over all entries of the first data seen
        (scikit-learn's ``SVC(gamma="scale")``; CSR rows from their nonzeros), once."""
        if self.gamma_ is None:
            self.gamma_ = scale_gamma_sparse(X) if sp.issparse(X) else scale_gamma(X)

    def use_gamma(self, gamma):
        """Take γ resolved outside (the streaming pipeline's scaler stage, from its window)
        before the first learning step; returns self."""
        self.gamma_ = float(gamma)
        return self

    def _linear(self):
        """False: a kernel model (:class:`._pegasos.PegasosClassifier`, the linear one, says True)."""
        return False

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
