"""The novelty pipeline :class:`StreamingNovelty`: a budgeted one-class SVM inside the task
stages of :mod:`.tasks` (warm-up scaling, rehearsal, drift of the score distribution) with a
threshold of a stated false-alarm rate on recent scores (docs/novelty.md)."""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils.validation import check_is_fitted

from ..budgeted.tasks import BudgetedOneClassSVM
from ..contract import Learned
from ..persistence import register_estimator
from .stages.recent import DEFAULT_WINDOW, ScoreThreshold, upper_quantile
from .task_served import ServedNovelty
from .tasks import DEFAULT_FALSE_ALARM, DEFAULT_TASK_MEMORY, DEFAULT_TASK_WARMUP, _finite_rows, _StreamingTask


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
    >>> from svmstream.solvers.online.novelty import StreamingNovelty
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
