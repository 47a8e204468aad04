"""What the streaming pipeline counts and reads out of its stages (a mixin of
:class:`.pipeline.StreamingClassifier`): examples received, learned, pending, replayed and
discarded (``n_received_ = n_learned_ + n_pending_``), the warm-up, the scaling, a linear
model's weights on the features as sent, the last margins, the drift monitor and the
calibrator."""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted


class PipelineCounts:
    """The counts and stage read-outs of :class:`.pipeline.StreamingClassifier`."""

    # ------------------------------------------------------------------ counts
    def _stage(self, name):
        stage = self.__dict__.get(name)
        if stage is None:
            raise AttributeError(f"{type(self).__name__} has not received an example yet")
        return stage

    @property
    def n_pending_(self):
        """Examples received and not learned yet: in the scaler's window or the order stage's buffer."""
        return self._stage("_scaler").pending + self._stage("_order").pending

    @property
    def n_rehearsed_(self):
        """Rehearsal steps taken (learning steps in ``t_``, not received examples): the
        rehearsal stage's count (:attr:`~.stages.RehearsalStage.steps`)."""
        return int(self._stage("_rehearsal").steps)

    @property
    def n_replayed_(self):
        """Rows the run guard replayed (learning steps in ``t_``, not received examples)."""
        return self._stage("_order").n_replayed

    @property
    def n_discarded_(self):
        """Buffered examples dropped at drift detections (states saved before detections stopped
        dropping them keep their count; 0 otherwise)."""
        return self._stage("_order").n_discarded

    @property
    def n_seen_(self):
        """Examples received: learned (``t_`` − rehearsal steps − replayed rows, plus the
        examples of weight 0, which take no step), pending and discarded."""
        learned = int(self.model_.t_) - self.n_rehearsed_ - self.n_replayed_ + self.n_weightless_
        return learned + self.n_pending_ + self.n_discarded_

    @property
    def n_weightless_(self):
        """Examples received with weight 0: learned as no step (``docs/weights.md``)."""
        return int(self.__dict__.get("_n_weightless", 0))

    @n_weightless_.setter
    def n_weightless_(self, value):
        self.__dict__["_n_weightless"] = int(value)

    @property
    def weight_received_(self) -> float:
        """The sum of the importance weights of the examples received (each unweighted one
        counts 1)."""
        return float(self.__dict__.get("_weight_sum", self.__dict__.get("n_received_", 0)))

    @property
    def weighted_(self) -> bool:
        """Whether any example received had a weight other than 1."""
        return bool(self.__dict__.get("_weighted", False))

    def _count_weights(self, n: int, weights) -> None:
        """Add a received batch of ``n`` examples to :attr:`weight_received_`."""
        self.__dict__["_weight_sum"] = self.weight_received_ + (
            n if weights is None else float(weights.sum())
        )
        if weights is not None and not self.weighted_:
            self.__dict__["_weighted"] = bool((weights != 1.0).any())

    def weight_figures(self) -> dict:
        """``{"sum", "weighted", "zero_weight"}``: the weights received (``docs/weights.md``)."""
        return {"sum": self.weight_received_, "weighted": self.weighted_, "zero_weight": self.n_weightless_}

    @property
    def n_learned_(self):
        """Received examples that were learned (rehearsal and run-guard replays not counted)."""
        check_is_fitted(self)
        return self.n_seen_ - self.n_pending_ - self.n_discarded_

    @property
    def warming_up_(self):
        """True while the scaler's warm-up window is open (predictions raise ``WarmingUp``)."""
        return not self._stage("_scaler").ready

    @property
    def scaling_(self):
        """The scaling in use ("standard", "maxabs" or "none"; None before the window closes)."""
        return self._stage("_scaler").kind

    @property
    def coef_(self):
        """Linear models: the weights on the features as sent, (1, d) or (n_classes, d): the
        engine's (on scaled features) times the frozen scaling factors."""
        coef = self.model_.coef_
        return coef * self._stage("_scaler").factor[None, :]

    @property
    def intercept_(self):
        """The bias (K,); a linear model with an offset (``scaling="standard"``): b − coef_ · offset."""
        model = self.model_
        offset = self._stage("_scaler").offset
        if not model._linear() or not offset.any():
            return model.intercept_
        return model._bias - self.coef_ @ offset

    @property
    def last_margins_(self):
        """f(x) before each step on the received examples the last call learned, (m,) or
        (m, K) float64 (the whole batch also when it was learned in the drift stage's pieces)."""
        last = self.__dict__.get("_last")
        return last[0] if last is not None else self._engine_attr("last_margins_")

    @property
    def last_y_(self):
        """The labels of :attr:`last_margins_`' examples (m,), from ``classes_``."""
        last = self.__dict__.get("_last")
        return last[1] if last is not None else self._engine_attr("last_y_")

    def _engine_attr(self, name):
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"{type(self).__name__} has no {name} before it has learned")
        return getattr(model, name)

    @property
    def drift_(self):
        """The drift stage's :class:`~svmstream.solvers.drift.DriftMonitor` (``n_detections``,
        ``last_detection_at``)."""
        if "_drift" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} has no drift_ before it has learned")
        return self._drift.monitor

    @property
    def calibrator_(self):
        """The calibration stage's :class:`~svmstream.solvers.calibration.MarginCalibrator`."""
        if self.__dict__.get("_calibration") is None:
            raise AttributeError(f"{type(self).__name__} has no calibrator_ before it has learned")
        return self._calibration.calibrator
