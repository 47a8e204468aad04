""":class:`ServedTask`: the model contract (:mod:`..contract`) of the regression and novelty
pipelines (:mod:`.tasks`): report, finiteness, what they learned last, copies, widening and the
byte estimate.  No classes (``HAS_CLASSES = False``); their own metrics go in
``ModelReport.metrics`` (regression: the recent prequential MAE and the 90 % conformal
half-width; novelty: the threshold and its false-alarm rate)."""

from __future__ import annotations

import copy
from typing import ClassVar

import numpy as np

from ..budgeted import WarmingUp
from ..contract import ExampleAccount, Learned, ModelReport
from .race.losses import absolute_errors, evaluation_losses, regression_scale
from .served import drift_of

#: Rows of a batch on which :meth:`ServedTask.nonfinite` checks the decisions.
PROBE_ROWS = 4


class ServedTask:
    """Mixin of :class:`.tasks.StreamingRegressor` and :class:`.tasks.StreamingNovelty`."""

    HAS_CLASSES: ClassVar[bool] = False
    LEARNS_ONLINE: ClassVar[bool] = True

    def fitted(self) -> bool:
        return hasattr(self, "engine_")

    def input_width(self) -> int | None:
        return int(self.n_features_in_) if self.fitted() else None

    def drift(self):
        return drift_of(getattr(self, "drift_", None))

    def serves(self) -> bool:
        return self._learned() and not self.warming_up_

    def class_count(self):
        return None

    def serving_settings(self):
        return None

    def paired_loss(self, X, y, decision=None):
        """(n,) float64: the task's loss of each row's prediction (:mod:`.race.losses`);
        ``decision``: the decision values of X when the caller has them."""
        return self._LOSS(self.decision_function(X) if decision is None else decision, y)

    def loss_scale(self):
        """None: 0/1 losses (a novelty model's against evaluation labels)."""
        return None

    def last_learned(self) -> Learned | None:
        return getattr(self, "_last", None)

    def report(self) -> ModelReport:
        if not self.fitted():
            return ModelReport(task=self.TASK, has_classes=False)
        engine = self.engine_
        learned = self._learned()
        return ModelReport(
            task=self.TASK,
            has_classes=False,
            fitted=True,
            warming_up=bool(self.warming_up_),
            examples=ExampleAccount(int(self.n_received_), int(self.n_learned_), int(self.n_pending_)),
            n_features=int(self.n_features_in_),
            n_classes=None,
            n_support_vectors=engine.n_support_ if learned else 0,
            steps=engine.n_steps_ if learned else 0,
            n_seen=int(self.n_received_),
            gamma=float(engine.gamma_) if learned else None,
            lambda_=float(getattr(engine, "lambda_eff_", 0.0)) or None if learned else None,
            scaling=self.scaling,
            scaling_reason="the warm-up window's mean and standard deviation"
            if self.scaling != "none"
            else "off",
            drift=self.drift(),
            statistics={
                "merges": engine.n_merges_ if learned else 0,
                "violations": engine.n_violations_ if learned else 0,
                "rehearsal_memory_rows": int(self._mem_n[0]),
                "weights": self.weight_figures(),
            },
            metrics=self._task_metrics(),
        )

    def nonfinite(self, X=None) -> str | None:
        if not self._learned():
            return None
        engine = self.engine_
        if not np.all(np.isfinite(engine.dual_coef_)):
            return "dual coefficients"
        if not (np.all(np.isfinite(engine._bias)) and np.all(np.isfinite(getattr(engine, "_rho", 0.0)))):
            return "intercept"
        if X is not None and not np.all(np.isfinite(self.decision_function(np.asarray(X)[:PROBE_ROWS]))):
            return "decisions"
        return None

    def _check_serves(self) -> None:
        if not self.serves():
            held = self.n_pending_ if self.fitted() else 0
            raise WarmingUp(f"warming up: {held} of the {self.warmup} warm-up examples have arrived")

    def published_copy(self):
        """A copy predictions read while this model learns on (the reservoir is shared: the copy
        never learns)."""
        if self.fitted():
            self._stated()  # the calibration values it serves, fixed before the copy shares them
        out = copy.copy(self)
        for name in ("engine_", "drift_", "_target", "intervals_", "scores_", "_window_X", "_window_y",
                     "_window_w"):  # fmt: skip
            if name in self.__dict__:
                setattr(out, name, copy.deepcopy(self.__dict__[name]))
        return out

    def flush(self):
        """Learn the warm-up window now (the end of a stream); returns self."""
        if self.fitted() and self.warming_up_ and self.n_pending_:
            self._after_learning(self._close_now())
        return self

    def warm_start(self):
        """A detached copy past its window with a fresh drift detector and an empty rehearsal
        memory (it rehearses the rows it receives from now on, as a classifier pipeline's warm
        copy), or None while warming up."""
        if not self.serves():
            return None
        from ..drift import DriftMonitor

        out = copy.deepcopy(self)
        out.drift_ = DriftMonitor()
        out._mem_n[:] = 0
        return out

    def grow_features(self, n_features: int):
        """Widen to ``n_features`` inputs (a new feature is 0 in every SV and remembered row)."""
        d = int(self.n_features_in_)
        extra = int(n_features) - d
        if extra <= 0:
            return self
        self._offset = np.r_[self._offset, np.zeros(extra)]
        self._factor = np.r_[self._factor, np.ones(extra)]
        self._grow_x.sq = np.r_[self._grow_x.sq, np.zeros(extra)]
        self._mem_X = np.hstack([self._mem_X, np.zeros((self._mem_X.shape[0], extra))])
        self._window_X = [np.hstack([part, np.zeros((part.shape[0], extra))]) for part in self._window_X]
        if self._learned():
            self.engine_.widen(n_features)
        self.n_features_in_ = int(n_features)
        return self

    # ------------------------------------------------------------------ weights (docs/weights.md)
    def _start_weights(self) -> None:
        self.n_weightless_ = 0
        self._weight_sum = 0.0
        self._weighted = False

    def _weighed(self, X, y, weights):
        """Count a received batch's weights (None: ones) and drop its rows of weight 0, which
        are learned as nothing (counted in ``n_learned_`` and ``n_weightless_``); returns
        ``(X, y, w)`` of the rows that go on, ``w`` (m,) float64."""
        n = X.shape[0]
        if weights is None:
            self._weight_sum += n
            return X, y, np.ones(n)
        self._weight_sum += float(weights.sum())
        self._weighted = self._weighted or bool((weights != 1.0).any())
        keep = weights > 0.0
        if keep.all():
            return X, y, weights
        dropped = int(n - keep.sum())
        self.n_weightless_ += dropped
        self.n_learned_ += dropped
        return X[keep], y[keep], weights[keep]

    def weight_figures(self) -> dict:
        """``{"sum", "weighted", "zero_weight"}`` of the examples received (unweighted ones
        count 1), as the classifier pipeline's."""
        return {
            "sum": float(self._weight_sum),
            "weighted": bool(self._weighted),
            "zero_weight": self.n_weightless_,
        }

    def _load_weights(self, saved) -> None:
        """Restore :meth:`weight_figures` (None: a state saved before weights, every row weighed 1)."""
        saved = saved or {"sum": self.n_received_, "weighted": False, "zero_weight": 0}
        self._weight_sum, self._weighted = float(saved["sum"]), bool(saved["weighted"])
        self.n_weightless_ = int(saved["zero_weight"])

    def check_params(self):
        """Validate this pipeline's and its engine's parameters; returns self.  Raises ValueError
        naming the parameter (``budget must be an integer >= 2, got 1``)."""
        if hasattr(self, "_parameter_constraints"):
            self._validate_params()
        est = self.estimator if self.estimator is not None else self._default_engine()
        est._validate_params()
        return self

    def add_class(self, label):
        raise ValueError(f"a {self.TASK} model has no classes")

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """Bytes of the arrays at width ``n_features``: the engine's pool, the reservoir (rows,
        targets, dual variables, weights, out-of-sample values), the window, the stages' windows
        and the scales (offset, factor, the growing sums) (an upper bound)."""
        est = self.estimator if self.estimator is not None else self._default_engine()
        cap = int(est.budget) + 1
        d = int(n_features)
        engine = cap * (d + 6) * 8 + (cap * cap * 8 if est.maintenance == "project" else 8) + d * 8 + 4096
        memory = min(int(self.rehearsal_memory), (16 * 2**20) // (8 * max(d, 1))) if self.rehearsal else 0
        return (
            engine
            + memory * (d + 4) * 8
            + int(self.warmup) * (d + 2) * 8
            + int(self.window) * 8
            + 3 * d * 8
            + 4096
        )


class ServedRegression(ServedTask):
    """The regressor's part: absolute errors, scaled by 4 σ of its first targets."""

    _LOSS = staticmethod(absolute_errors)

    def loss_scale(self):
        """:func:`~.race.losses.regression_scale` of the first targets' spread (None before)."""
        return regression_scale(self._target.spread) if self.fitted() else None


class ServedNovelty(ServedTask):
    """The novelty detector's part: 0/1 losses of the outlier flag against evaluation labels."""

    _LOSS = staticmethod(evaluation_losses)
