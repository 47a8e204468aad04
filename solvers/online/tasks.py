"""Streaming pipelines of the tasks beyond classification: regression and novelty detection.

:class:`StreamingRegressor` and :class:`StreamingNovelty` put these stages around a plain
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

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, OutlierMixin, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from ..budgeted._weights import checked_weights
from ..budgeted.tasks import BudgetedOneClassSVM, BudgetedSCARegressor
from ..contract import Learned
from ..drift import DriftMonitor
from ..persistence import register_estimator
from .stages.growth import DEFAULT_GROWTH, GrowingScale
from .stages.recent import DEFAULT_WINDOW, ConformalIntervals, ScoreThreshold, upper_quantile
from .stages.target import TargetScaler
from .task_served import ServedNovelty, ServedRegression
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
        rehearsal_tol=DEFAULT_REHEARSAL_TOL, random_state=None,
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
        super()._setup(d)
        self.intervals_ = ConformalIntervals(self.window)

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


@register_estimator
class StreamingNovelty(ServedNovelty, OutlierMixin, _StreamingTask):
    """Budgeted one-class SVM on a stream: warm-up scaling, rehearsal, a threshold of a stated
    false-alarm rate on recent scores and drift of the score distribution (module docstring).

    Scores are anomaly scores, higher is more anomalous: ``score = ρ − ⟨w, φ(x)⟩``
    (the one-class SVM's decision with the sign turned); ``outlier = score > threshold_``.

    Parameters
    ----------
    estimator : BudgetedOneClassSVM or None, default=None
        None: ``BudgetedOneClassSVM(nu=0.2, merge_solver="lookup-wd")`` (B = 500, γ = "scale").
    warmup, scaling, rehearsal, rehearsal_memory, window, random_state : as
        :class:`StreamingRegressor` (``rehearsal`` default 1)
    false_alarm : float in (0, 1), default=0.05
        The share of (inlier) rows the threshold flags.
    feature_growth : float > 1 or None, default=None
        As :class:`StreamingRegressor`'s (off: the one-class engine has no ``SCALES_GROW``).
    calibration : {"reservoir", "recent"}, default="reservoir"
        The threshold's scores: the remembered rows' latest out-of-sample scores (the Pegasos
        own part taken off, :func:`svmstream.solvers.budgeted._task_rehearsal.oneclass_stream`),
        or the last ``window`` prequential scores (docs/novelty.md).

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.online.tasks import StreamingNovelty
    >>> rng = np.random.default_rng(0)
    >>> model = StreamingNovelty(warmup=200, random_state=0).partial_fit(rng.normal(size=(3000, 2)))
    >>> [bool(v) for v in model.outlier(np.array([[0.0, 0.0], [5.0, 5.0]]))]
    [False, True]
    """

    def __init__(
        self, estimator=None, *, warmup=DEFAULT_TASK_WARMUP, scaling="standard", rehearsal=1,
        rehearsal_memory=DEFAULT_TASK_MEMORY, window=DEFAULT_WINDOW, false_alarm=DEFAULT_FALSE_ALARM,
        feature_growth=None, calibration="reservoir", random_state=None,
    ):  # fmt: skip
        self.estimator = estimator
        self.warmup = warmup
        self.scaling = scaling
        self.rehearsal = rehearsal
        self.rehearsal_memory = rehearsal_memory
        self.window = window
        self.false_alarm = false_alarm
        self.feature_growth = feature_growth
        self.calibration = calibration
        self.random_state = random_state

    TASK = "novelty"

    def _default_engine(self):
        return BudgetedOneClassSVM(nu=0.2, merge_solver="lookup-wd")

    def _setup(self, d):
        super()._setup(d)
        self.scores_ = ScoreThreshold(self.window)

    def _parts(self):
        return {**super()._parts(), "scores": self.scores_}

    def _restore_part(self, key, part):
        return ("scores_", part) if key == "scores" else super()._restore_part(key, part)

    def _stated(self) -> None:
        _ = self.threshold_

    def partial_fit(self, X, y=None, classes=None, sample_weight=None):
        """Learn rows X (n, d) with importance weights ``sample_weight`` (n,) >= 0 (None: ones;
        each row's hinge term scaled by its weight); returns self.  ValueError on NaN/inf or a
        bad weight naming ``sample_weight[i]``.  ``y``: never learned; its values (evaluation
        labels: 1 outlier, 0 inlier, NaN unknown) come back as the targets of
        :meth:`last_learned`, for the service's meters; ``classes`` is ignored."""
        X = _finite_rows(X)
        labels = np.zeros(X.shape[0]) if y is None else np.asarray(y, dtype=np.float64)
        self._after_learning(self._receive(X, labels, sample_weight))
        return self

    def _after_learning(self, got) -> None:
        if got is None:
            self._last = Learned(np.zeros(0), np.zeros(0))
            return
        scores = -got[1]
        self._last = Learned(scores, got[0])
        threshold = self.threshold_
        if np.isfinite(threshold):
            self.drift_.update(scores > threshold)
        self.scores_.observe(scores)
        self.__dict__.pop("_calib", None)
        self.__dict__.pop("_threshold", None)
        _ = self.threshold_

    def _task_metrics(self) -> dict:
        threshold = self.threshold_
        return (
            {"threshold": threshold, "false_alarm": float(self.false_alarm)} if np.isfinite(threshold) else {}
        )

    def decision_function(self, X):
        """threshold − score (n,) float64: negative for an outlier (scikit-learn's convention);
        raises ``WarmingUp`` while the warm-up window is open."""
        self._check_serves()
        return self.threshold_ - self.score_samples(X)

    def fit(self, X, y=None):
        """One pass over X in the order given (a fresh model); returns self."""
        self.__dict__.pop("engine_", None)
        return self.partial_fit(X)

    @property
    def threshold_(self) -> float:
        """The (1 − false_alarm) upper quantile of the remembered rows' out-of-sample scores
        (``calibration="reservoir"``) or of the last ``window`` prequential scores (``"recent"``,
        or before any row is remembered); ∞ before any score.  Stated after each learned batch."""
        if not hasattr(self, "scores_"):
            return np.inf
        if "_threshold" not in self.__dict__:
            held = self._calibration()
            level = 1.0 - float(self.false_alarm)
            self._threshold = (
                upper_quantile(held, level) if held.shape[0] else self.scores_.threshold(self.false_alarm)
            )
        return self._threshold

    def score_samples(self, X):
        """Anomaly scores ρ − ⟨w, φ(x)⟩ (n,) float64, higher is more anomalous (0 while warming up)."""
        check_is_fitted(self, "engine_")
        if not self._learned():
            return np.zeros(np.asarray(X).shape[0])
        return -self.engine_.decision_function(self._scaled(X))

    def outlier(self, X):
        """(n,) bool: score above :attr:`threshold_`."""
        return self.score_samples(X) > self.threshold_

    def predict(self, X):
        """+1 inlier, −1 outlier (scikit-learn's convention): (n,) int64."""
        return np.where(self.outlier(X), -1, 1)
