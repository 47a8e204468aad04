"""What the budgeted regressor and one-class SVM share: their state, its checks and persistence.

The state is the classifier's layout (:mod:`._state`) with one coefficient column and a dense
(d, B+1) pool: ``_sv_t``, ``_sv_sq``, ``_coef``, ``_bias`` (the regressor's b, the one-class ρ),
``_counters``, ``_reals``, ``_k_inv`` (projection only), and the work arrays ``_x_buf``,
``_row_buf``.  Nothing is scaled or held back: every row given is learned at once, in the order
given (the streaming pipeline, :mod:`svmstream.solvers.online.tasks`, adds the stages).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._hyperparameters import (
    BY_NAME,
    LAMBDA_MIN,
    MAINTENANCE,
    MERGE_SOLVERS,
    REFERENCE_N,
    TASK_HYPERPARAMETERS,
    Hyperparameter,
)
from ._decision import rbf_decision_batch
from ._lookup import merge_tables
from ._maintenance import Maintenance, Scratch
from ._merging import N_DIAG
from ._preprocessing import scale_gamma
from ._state import C_MERGES, C_N_SV, C_STEPS, C_VIOLATIONS, N_COUNTERS, N_REALS, R_SCALE

_NO_TABLE = np.zeros((2, 2))
_TASK_ROWS = {row.name: row for row in TASK_HYPERPARAMETERS}
#: Parameters of the estimators that have no row in the table (the plain estimator's own).
_EXTRA = {
    "epochs": [Interval(Integral, 1, None, closed="left")],
    "gss_eps": [Interval(Real, 0, 1, closed="neither")],
}


def constraint(row: Hyperparameter) -> list:
    """scikit-learn ``_parameter_constraints`` entry of one row of the hyperparameter table."""
    if row.choices:
        out: list = [StrOptions(set(row.choices))]
    elif row.type is bool:
        out = ["boolean"]
    elif row.type is int and row.name == "random_state":
        out = ["random_state"]
    else:
        kind = Integral if row.type is int else Real
        lo = row.ge if row.ge is not None else row.gt
        closed_lo = row.ge is not None
        closed = (
            ("left" if closed_lo else "neither") if row.le is None else ("both" if closed_lo else "right")
        )
        out = [Interval(kind, lo, row.le, closed=closed)]
    out.extend(StrOptions({w}) for w in row.words)
    if row.nullable:
        out.append(None)
    return out


def constraints(*names: str) -> dict:
    """``_parameter_constraints`` of ``names`` from the table (rows of :data:`HYPERPARAMETERS` and
    :data:`TASK_HYPERPARAMETERS`; ``epochs`` and ``gss_eps`` are the plain estimators' own)."""
    out = {}
    for name in names:
        if name in _EXTRA:
            out[name] = _EXTRA[name]
        else:
            out[name] = constraint(_TASK_ROWS.get(name) or BY_NAME[name])
    if "lambda_" in out:  # the table's bound is ge=LAMBDA_MIN with None allowed
        out["lambda_"] = [Interval(Real, LAMBDA_MIN, None, closed="left"), None]
    return out


def writable(a) -> np.ndarray:
    """``a`` as a C-contiguous float64 array the kernels can take (a read-only one is copied)."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    return a if a.flags.writeable else a.copy()


def regularisation(lambda_, C, n_samples, n_rows) -> float:
    """λ: ``lambda_`` if given, else 1/(C·n) with n = ``n_samples``, else ``n_rows`` (fit), else
    :data:`~svmstream.solvers._hyperparameters.REFERENCE_N` (a stream), as the classifier's."""
    if lambda_ is not None:
        return float(lambda_)
    n = n_samples if n_samples is not None else (n_rows if n_rows is not None else REFERENCE_N)
    return max(1.0 / (float(C) * float(n)), LAMBDA_MIN)


class BudgetedTaskModel(BaseEstimator):
    """Shared machinery of :class:`BudgetedSGDRegressor`, :class:`BudgetedSCARegressor` and
    :class:`BudgetedOneClassSVM` (not an estimator by itself)."""

    #: bump when the saved layout changes
    STATE_VERSION = 1
    #: Whether the streaming pipeline grows the scales under this engine (:meth:`rescale`;
    #: measured per engine, docs/regression.md).
    SCALES_GROW = False

    # ------------------------------------------------------------------ state
    def _allocate(self, d: int) -> None:
        cap = int(self.budget) + 1
        self.n_features_in_ = d
        self._sv_t = np.zeros((d, cap))
        self._sv_sq = np.zeros(cap)
        self._coef = np.zeros((cap, 1))
        self._bias = np.zeros(1)
        self._counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self._reals = np.zeros(N_REALS)
        self._reals[R_SCALE] = 1.0
        self._k_inv = np.zeros((cap, cap)) if self.maintenance == "project" else np.zeros((1, 1))
        self._x_buf = np.zeros(d)
        self._row_buf = np.zeros(2 * cap)
        self._diag = np.zeros(N_DIAG)

    def _maintenance(self) -> Maintenance:
        lookup = self.merge_solver in ("lookup-h", "lookup-wd")
        h_table, wd_table = merge_tables() if lookup else (_NO_TABLE, _NO_TABLE)
        return Maintenance(
            code=MAINTENANCE[self.maintenance],
            merge_solver=MERGE_SOLVERS[self.merge_solver],
            gss_eps=float(self.gss_eps),
            h_table=h_table,
            wd_table=wd_table,
            ref_solver=-1,
            diag=self._diag,
        )

    def _scratch(self) -> Scratch:
        return Scratch(x_buf=self._x_buf, row_buf=self._row_buf)

    def _start(self, X, reset: bool) -> None:
        """Allocate on the first batch (or on ``reset``), resolving γ = "scale" from it."""
        if reset or not hasattr(self, "_sv_t"):
            self._allocate(X.shape[1])
            self.gamma_ = scale_gamma(X) if isinstance(self.gamma, str) else float(self.gamma)

    def _rows(self, X, reset: bool):
        """X as float64 C-contiguous (n, d); raises ValueError on NaN/inf or a wrong width."""
        X = validate_data(self, X, reset=reset, dtype=np.float64, order="C", accept_sparse=False)
        return writable(X)

    # ------------------------------------------------------------------ model
    def _raw_decision(self, X) -> np.ndarray:
        """scale·Σ_j coef[j]·k(sv_j, x) + bias for the rows of X: (n,) float64."""
        check_is_fitted(self, "gamma_")
        X = self._rows(X, reset=False)
        out = np.zeros((X.shape[0], 1))
        n_sv = int(self._counters[C_N_SV])
        rbf_decision_batch(
            X, self._sv_t, self._sv_sq, self._coef, self._bias, n_sv, self.gamma_,
            float(self._reals[R_SCALE]), out, self._row_buf,
        )  # fmt: skip
        return out[:, 0]

    def rescale(self, feature_ratio: np.ndarray | None, output_ratio: float = 1.0) -> None:
        """Express the model in new units (the streaming pipeline's growing scales,
        :mod:`svmstream.solvers.online.stages.growth`): every support vector's column j times
        ``feature_ratio[j]`` (old factor / new factor; None: unchanged), the coefficients and the
        bias times ``output_ratio`` (a regressor's target factor old / new; ρ of the one-class
        model is not an output and stays).  With ``maintenance="project"`` the maintained
        inverse kernel matrix belongs to the old points: a feature ratio is refused (ValueError)."""
        n_sv = int(self._counters[C_N_SV])
        if feature_ratio is not None:
            if self.maintenance == "project":
                raise ValueError(
                    "projection keeps the inverse kernel matrix of its SVs: features cannot be rescaled"
                )
            self._sv_t[:, :n_sv] *= np.asarray(feature_ratio, dtype=np.float64)[:, None]
            self._sv_sq[:n_sv] = np.einsum("ij,ij->j", self._sv_t[:, :n_sv], self._sv_t[:, :n_sv])
        if output_ratio != 1.0:
            self._coef[:n_sv] *= output_ratio
            self._rescale_output(output_ratio)

    def widen(self, n_features: int) -> None:
        """Take ``n_features`` inputs (more than now): a new input is 0 in every support vector."""
        extra = int(n_features) - self._sv_t.shape[0]
        if extra <= 0:
            return
        self._sv_t = np.vstack([self._sv_t, np.zeros((extra, self._sv_t.shape[1]))])
        self._x_buf = np.zeros(int(n_features))
        self.n_features_in_ = int(n_features)
        self._widen_extra(extra)

    def _widen_extra(self, extra: int) -> None:
        """What else has one entry per input."""

    def _rescale_output(self, ratio: float) -> None:
        """What else is in output units (the regressors' bias)."""
        self._bias *= ratio

    @property
    def n_support_(self) -> int:
        """Support vectors held (≤ budget)."""
        return int(self._counters[C_N_SV])

    @property
    def support_vectors_(self) -> np.ndarray:
        """(n_sv, d) float64: the support vectors (merged points are new points)."""
        return self._sv_t[:, : self.n_support_].T.copy()

    @property
    def dual_coef_(self) -> np.ndarray:
        """(n_sv,) float64: the effective coefficients (scale folded in)."""
        return self._coef[: self.n_support_, 0] * self._reals[R_SCALE]

    @property
    def n_steps_(self) -> int:
        return int(self._counters[C_STEPS])

    @property
    def n_violations_(self) -> int:
        """Steps whose loss was positive (an SV was added)."""
        return int(self._counters[C_VIOLATIONS])

    @property
    def n_merges_(self) -> int:
        return int(self._counters[C_MERGES])

    # ------------------------------------------------------------------ persistence
    _ARRAYS = ("_sv_t", "_sv_sq", "_coef", "_bias", "_counters", "_reals", "_k_inv")

    def get_state(self):
        """(arrays, meta) for :mod:`svmstream.solvers.persistence` (pickle-free)."""
        check_is_fitted(self, "gamma_")
        arrays = {name.lstrip("_"): getattr(self, name).copy() for name in self._ARRAYS}
        arrays.update(self._extra_state())
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": self.get_params(),
            "n_features_in": int(self.n_features_in_),
            "gamma": float(self.gamma_),
        }
        return arrays, meta

    def _extra_state(self) -> dict:
        return {}

    def _load_extra(self, arrays) -> None:
        """Restore what :meth:`_extra_state` saved."""

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild an estimator that continues exactly where :meth:`get_state` left off;
        ValueError if the state does not fit its parameters."""
        if meta.get("state_version") != cls.STATE_VERSION:
            raise ValueError(f"unsupported {cls.__name__} state version {meta.get('state_version')}")
        params = dict(meta["params"])
        est = cls(**params)
        est._allocate(int(meta["n_features_in"]))
        est.gamma_ = float(meta["gamma"])
        for name in cls._ARRAYS:
            target = getattr(est, name)
            saved = np.asarray(arrays[name.lstrip("_")])
            if saved.shape != target.shape:
                raise ValueError(f"saved {name.lstrip('_')} has shape {saved.shape}, expected {target.shape}")
            target[...] = saved
        est._load_extra(arrays)
        return est

    def __setstate__(self, state):
        """Unpickling (scikit-learn's checks load arrays read-only): the kernels write to the
        state and work arrays, so read-only ones are copied."""
        state = {
            k: (v.copy() if isinstance(v, np.ndarray) and not v.flags.writeable else v)
            for k, v in state.items()
        }
        super().__setstate__(state)

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "gamma_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags
