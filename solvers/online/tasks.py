"""Streaming pipelines of the tasks beyond classification: regression and novelty detection.

:class:`StreamingRegressor` (here) and :class:`~.novelty.StreamingNovelty` put these stages around a plain
budgeted estimator (:mod:`svmstream.solvers.budgeted.tasks`), in the order an example meets them:

1. **warm-up** — the first ``warmup`` rows are held; they fix the feature standardisation
   (``scaling="standard"``: mean/std per feature of the window; ``"none"``), ``gamma="scale"``
   (1/(d·Var) of the scaled window) and, for regression, the target standardisation
   (:mod:`.stages.target`); then they are learned in a random order (the order stage of a
   window);
2. the estimator's own step on each row, in arrival order;
3. **rehearsal** — each row is offered to a uniform reservoir of ``rehearsal_memory`` rows and
   ``rehearsal`` extra steps are taken on reservoir rows (:mod:`svmstream.solvers.budgeted._task_rehearsal`);
   this also undoes a sorted source's order over the reservoir;
4. **intervals** (regression) / **threshold** (novelty) from the prequential values of the last
   ``window`` rows (:mod:`.stages.recent`);
5. **drift** — a :class:`svmstream.solvers.drift.DriftMonitor` on the exceedance bits: for
   regression |y − ŷ| beyond the current 90 % conformal half-width (10 % of rows when nothing
   changes), for novelty a score beyond the threshold (``false_alarm`` of rows); an increase of
   that rate is a drift of the loss or of the score distribution.  Detections are counted
   (``drift_detections_``); the model is left as it is.

Every row received is learned or pending: ``n_received_ = n_learned_ + n_pending_``.

Importance weights (``partial_fit(..., sample_weight=w)``, ``docs/weights.md``) travel with
their rows through the window (and its random order) and the reservoir to the estimator's step,
and are saved with them; a row of weight 0 is received, counted as learned and enters no stage
(as if not sent).  The scalings of X and y, the intervals, the threshold and drift are
unweighted: each row of weight > 0 counts once.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from ..budgeted._weights import checked_weights
from ..budgeted.tasks import BudgetedSCARegressor
from ..contract import Learned
from ..drift import DriftMonitor
from ..persistence import register_estimator
from .stages.growth import DEFAULT_GROWTH, GrowingScale
from .stages.recent import DEFAULT_WINDOW, ConformalIntervals, upper_quantile
from .stages.target import TargetScaler
from .task_served import ServedRegression
from .task_stages import TaskStages
from .task_state import TaskState

#: Defaults of the stages (docs/regression.md, docs/novelty.md say how they were chosen).
DEFAULT_TASK_WARMUP = 200
DEFAULT_TASK_REHEARSAL = 4
DEFAULT_TASK_MEMORY = 20_000
#: Rehearsal memory is bounded at this many bytes of rows as well.
MEMORY_MAX_BYTES = 16 * 2**20
#: The level of the conformal half-width whose exceedances the drift monitor watches.
DRIFT_LEVEL = 0.9
DEFAULT_FALSE_ALARM = 0.05
#: Where the regressor's intervals come from: "reservoir" (the remembered rows' out-of-sample
#: residuals) or "recent" (the last ``window`` prequential residuals).
DEFAULT_CALIBRATION = "recent"
#: A rehearsal step of the dual regressor that would move α by at most this share of C is skipped.
DEFAULT_REHEARSAL_TOL = 0.0


def _finite_rows(X, n_features=None) -> np.ndarray:
    X = X.toarray() if sp.issparse(X) else X  # the kernels take dense rows
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got shape {X.shape}")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, the model {n_features}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X holds NaN or infinity")
    return np.ascontiguousarray(X)


class _StreamingTask(TaskStages, TaskState, BaseEstimator):
    """Shared stages (warm-up window, feature scaling, reservoir, drift) of the task pipelines."""

    def _setup(self, d: int) -> None:
        self.engine_ = clone(self.estimator) if self.estimator is not None else self._default_engine()
        self.n_features_in_ = d
        self._window_X: list[np.ndarray] = []
        self._window_y: list[np.ndarray] = []
        self._window_w: list[np.ndarray] = []
        self._start_weights()
        self.n_received_ = 0
        self.n_learned_ = 0
        self.warming_up_ = self.warmup > 0
        self._offset = np.zeros(d)
        self._factor = np.ones(d)
        cap = min(int(self.rehearsal_memory), MEMORY_MAX_BYTES // (8 * max(d, 1))) if self.rehearsal else 0
        self._mem_X = np.zeros((cap, d))
        self._mem_y = np.zeros(cap)
        self._mem_a = np.zeros(cap)
        self._mem_n = np.zeros(2, dtype=np.int64)
        self._mem_w = np.ones(cap)
        self._mem_s = np.full(cap, np.nan)
        self._rng = np.random.default_rng(self.random_state)
        self.drift_ = DriftMonitor()
        self._target = TargetScaler(self._scales_target())
        feature_growth, target_growth = self._growths()
        self._grow_x = GrowingScale(feature_growth, d, self.warmup)
        self._grow_y = GrowingScale(target_growth, 1, self.warmup)

    @property
    def n_pending_(self) -> int:
        """Rows received and not yet learned (the warm-up window)."""
        return self.n_received_ - self.n_learned_

    @property
    def drift_detections_(self) -> int:
        return self.drift_.n_detections if hasattr(self, "drift_") else 0

    def _scales_target(self) -> bool:
        return False

    def _receive(self, X, y, sample_weight=None):
        """Take a batch (importance weights ``sample_weight``, None: ones): hold it in the window
        or learn it; returns the prequential values of the rows learned now (for the stages) as
        (y_learned, out) or None.  Raises ValueError before anything changes on bad input."""
        X = _finite_rows(X, getattr(self, "n_features_in_", None))
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y has {y.shape[0]} values for {X.shape[0]} rows")
        weights = checked_weights(sample_weight, X.shape[0])
        if not hasattr(self, "engine_"):
            self._setup(X.shape[1])
        self.n_received_ += X.shape[0]
        X, y, w = self._weighed(X, y, weights)
        if not X.shape[0]:
            return None
        if self.warming_up_:
            room = self.warmup - sum(part.shape[0] for part in self._window_X)
            self._window_X.append(X[:room])
            self._window_y.append(y[:room])
            self._window_w.append(w[:room])
            if X.shape[0] < room:
                return None
            Xw, yw, ww = self._close_window()  # exactly `warmup` rows: the batch cut does not matter
            X, y, w = (np.concatenate(pair) for pair in ((Xw, X[room:]), (yw, y[room:]), (ww, w[room:])))
        return self._learn_rows(X, y, w)

    def _close_now(self):
        """Close the warm-up window with what it holds and learn it (``flush``)."""
        return self._learn_rows(*self._close_window())

    def _close_window(self):
        X = np.concatenate(self._window_X)
        y = np.concatenate(self._window_y)
        w = np.concatenate(self._window_w)
        self._window_X, self._window_y, self._window_w = [], [], []
        self.warming_up_ = False
        if self.scaling == "standard":
            self._offset = X.mean(axis=0)
            std = X.std(axis=0)
            self._factor = np.where(std > 0.0, std, 1.0)
        self._target.fit(y)
        if X.shape[0]:
            self._start_engine((X - self._offset) / self._factor)
        order = self._rng.permutation(X.shape[0])
        return X[order], y[order], w[order]

    def _start_engine(self, Xs) -> None:
        """Allocate the engine, γ = "scale" from ``Xs``: the scaled window (no window: the first
        batch, as the plain estimator's ``partial_fit``)."""
        self.engine_._validate_params()
        self.engine_._start(np.ascontiguousarray(Xs), reset=True)
        factor = self._gamma_factor()
        if factor != 1.0:  # γ = factor × "scale" (a regression race's candidate)
            self.engine_.gamma_ = factor * float(self.engine_.gamma_)

    def _gamma_factor(self) -> float:
        return 1.0

    def _learn(self, Xs, ys, w, out) -> None:
        if not hasattr(self.engine_, "_sv_t"):
            self._start_engine(Xs)
        draws = self._rng.random(Xs.shape[0] * (1 + int(self.rehearsal)))
        self.engine_.stream_steps(
            Xs, ys, w, self._memory(), int(self.rehearsal), draws, out, self._min_delta()
        )

    def _min_delta(self) -> float:
        return 0.0

    def _memory(self):
        return self._mem_X, self._mem_y, self._mem_a, self._mem_n, self._mem_w, self._mem_s

    def _scaled(self, X) -> np.ndarray:
        X = _finite_rows(X, self.n_features_in_)
        return np.ascontiguousarray((X - self._offset) / self._factor)

    def _learned(self) -> bool:
        return hasattr(self, "engine_") and hasattr(self.engine_, "_sv_t")

    def _parts(self) -> dict:
        return {"drift": self.drift_, "target": self._target, "grow_x": self._grow_x, "grow_y": self._grow_y}


@register_estimator
class StreamingRegressor(ServedRegression, RegressorMixin, _StreamingTask):
    """Budgeted kernel regression on a stream: warm-up scaling of X and y, rehearsal, drift and
    split-conformal prediction intervals around a plain regressor (module docstring).

    Parameters
    ----------
    estimator : BudgetedSCARegressor or None, default=None
        The engine (cloned); None: ``BudgetedSCARegressor(merge_solver="lookup-wd")`` (C = 1,
        ε = 0.1 on the standardised target, γ = "scale", B = 500: the batch ``SVR()`` defaults on
        standardised X and y; lookup-WD merging: the same RMSE as GSS at a quarter of the CPU on
        friedman1, docs/regression.md).
    warmup : int >= 0, default=200
    scaling : {"standard", "none"}, default="standard"
    target_scaling : bool, default=True
    rehearsal : int >= 0, default=4
    rehearsal_memory : int >= 0, default=20000
    window : int >= 1, default=2000
        Recent residuals of the conformal intervals.
    feature_growth, target_growth : float > 1 or None, default=1.5
        A feature's (the target's) standardisation factor grows to the RMS deviation of the rows
        learned so far about the window's mean once that exceeds this multiple of it, the model
        rescaled consistently (:mod:`.stages.growth`; a sorted source); None: fixed by the window.
        Checked at every row; off without a window or its scaling, and for an engine whose
        ``SCALES_GROW`` is false (BSGD: measured worse, docs/regression.md).
    calibration : {"recent", "reservoir"}, default="recent"
        The intervals' residuals: the last ``window`` prequential ones, or the remembered rows'
        latest leave-one-out ones (measured to over-cover, docs/regression.md).
    rehearsal_tol : float >= 0, default=0.0
        A rehearsal step moving α by at most ``rehearsal_tol``·C adds nothing; 0: every step.
    gamma_factor : float > 0, default=1.0
        γ = ``gamma_factor`` × the "scale" γ of the scaled window (the engine's ``gamma`` must
        be "scale" unless this is 1; the candidates of
        :class:`~.selection.regressor.SelectionRegressor` differ by it).  ValueError otherwise,
        at the first batch.
    random_state : int or None, default=None

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.online.tasks import StreamingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (3000, 2)); y = 100 * np.sin(X[:, 0]) + 5 * rng.normal(size=3000)
    >>> model = StreamingRegressor(warmup=200, random_state=0)
    >>> for lo in range(0, 3000, 500):
    ...     model = model.partial_fit(X[lo:lo + 500], y[lo:lo + 500])
    >>> lower, upper = model.predict_interval(X[:1000], 0.9)
    >>> bool(0.85 < np.mean((lower <= y[:1000]) & (y[:1000] <= upper)) < 0.97)
    True
    """

    def __init__(
        self, estimator=None, *, warmup=DEFAULT_TASK_WARMUP, scaling="standard", target_scaling=True,
        rehearsal=DEFAULT_TASK_REHEARSAL, rehearsal_memory=DEFAULT_TASK_MEMORY, window=DEFAULT_WINDOW,
        feature_growth=DEFAULT_GROWTH, target_growth=DEFAULT_GROWTH, calibration=DEFAULT_CALIBRATION,
        rehearsal_tol=DEFAULT_REHEARSAL_TOL, gamma_factor=1.0, random_state=None,
    ):  # fmt: skip
        self.estimator = estimator
        self.warmup = warmup
        self.scaling = scaling
        self.target_scaling = target_scaling
        self.rehearsal = rehearsal
        self.rehearsal_memory = rehearsal_memory
        self.window = window
        self.feature_growth = feature_growth
        self.target_growth = target_growth
        self.calibration = calibration
        self.rehearsal_tol = rehearsal_tol
        self.gamma_factor = gamma_factor
        self.random_state = random_state

    TASK = "regression"

    def _default_engine(self):
        return BudgetedSCARegressor(merge_solver="lookup-wd")

    def _scales_target(self) -> bool:
        return bool(self.target_scaling)

    def _min_delta(self) -> float:
        return float(self.rehearsal_tol) * float(self.engine_.C)

    def _growths(self):
        fx, _ = super()._growths()
        grows = self.warmup > 0 and self.target_scaling and self.engine_.SCALES_GROW
        return fx, (self.target_growth if grows else None)

    def _setup(self, d):
        factor = self.gamma_factor
        if isinstance(factor, bool) or not isinstance(factor, Real) or not factor > 0:
            raise ValueError(f"gamma_factor must be a number > 0, got {factor!r}")
        super()._setup(d)
        if factor != 1.0 and not isinstance(self.engine_.gamma, str):
            raise ValueError(
                f'gamma_factor multiplies gamma="scale"; the engine has gamma={self.engine_.gamma!r}'
            )
        self.intervals_ = ConformalIntervals(self.window)

    def _gamma_factor(self) -> float:
        return float(self.gamma_factor)

    def _parts(self):
        return {**super()._parts(), "intervals": self.intervals_}

    def _restore_part(self, key, part):
        return ("intervals_", part) if key == "intervals" else super()._restore_part(key, part)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Learn rows X (n, d) with numeric targets y (n,) and importance weights
        ``sample_weight`` (n,) >= 0 (None: ones; carried with each row; ``classes`` is ignored:
        no classes); returns self.  ValueError on NaN/inf, a non-numeric y or a bad weight
        naming ``sample_weight[i]`` (nothing changes then)."""
        y = np.asarray(y)
        if y.dtype.kind not in "iuf" or y.ndim != 1 or not np.all(np.isfinite(y)):
            raise ValueError("y must be a 1-D array of finite numbers")
        self._after_learning(self._receive(X, y.astype(np.float64), sample_weight))
        return self

    def _after_learning(self, got) -> None:
        if got is None:
            self._last = Learned(np.zeros(0), np.zeros(0))
            return
        y_true, out = got
        pred = self._target.inverse(out)
        self._last = Learned(pred, y_true)
        resid = np.abs(y_true - pred)
        half = self.half_width(DRIFT_LEVEL)
        if np.isfinite(half):
            self.drift_.update(resid > half)
        self.intervals_.observe(resid)
        self.__dict__.pop("_calib", None)
        self._calibration()

    def _calibration_unit(self) -> float:
        return self._target.std  # the residuals are kept on the scaled target

    def half_width(self, level: float) -> float:
        """q of the interval ŷ ± q of coverage ``level`` ∈ (0, 1): the split-conformal quantile
        of the remembered rows' out-of-sample residuals (``calibration="reservoir"``) or of the
        last ``window`` prequential residuals (``"recent"``, or before any row is remembered);
        ∞ without enough residuals."""
        if not 0.0 < float(level) < 1.0:
            raise ValueError(f"interval must be in (0, 1), got {level!r}")
        held = self._calibration() if hasattr(self, "intervals_") else np.zeros(0)
        if held.shape[0]:
            return upper_quantile(held, level)
        return self.intervals_.half_width(level) if hasattr(self, "intervals_") else np.inf

    def _task_metrics(self) -> dict:
        held = self.intervals_.values if hasattr(self, "intervals_") else np.zeros(0)
        if not held.shape[0]:
            return {}
        half = self.half_width(0.9)
        out = {"recent_mae": float(np.mean(held)), "recent_rmse": float(np.sqrt(np.mean(held**2)))}
        return out | ({"interval_90_half_width": half} if np.isfinite(half) else {})

    def decision_function(self, X):
        """ŷ (n,) float64; raises ``WarmingUp`` while the warm-up window is open."""
        self._check_serves()
        return self.predict(X)

    def fit(self, X, y):
        """One pass over X, y in the order given (a fresh model); returns self."""
        for name in ("engine_",):
            self.__dict__.pop(name, None)
        return self.partial_fit(X, y)

    def predict(self, X):
        """ŷ for the rows of X (n, d): (n,) float64; the window's mean target while warming up."""
        check_is_fitted(self, "engine_")
        if not self._learned():
            ys = np.concatenate(self._window_y) if self._window_y else np.zeros(1)
            return np.full(np.asarray(X).shape[0], float(np.mean(ys)))
        return self._target.inverse(self.engine_.predict(self._scaled(X)))

    def predict_interval(self, X, level=0.9):
        """(lower, upper), each (n,) float64: ŷ ∓ the split-conformal half-width of ``level``
        on recent prequential residuals (±∞ before enough residuals)."""
        pred = self.predict(X)
        half = self.half_width(level)
        return pred - half, pred + half
