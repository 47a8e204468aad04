""":class:`ServedPipeline`: the contract (:mod:`..contract`) of the streaming pipeline
(:class:`~.pipeline.StreamingClassifier`): its report, the finiteness check, what it learned
last, its warm copy and its byte estimate, read from the pipeline's stages and engine."""

from __future__ import annotations

import copy as _copy
from typing import Any, ClassVar

import numpy as np

from ..budgeted import PegasosClassifier, model_bytes, window_bytes
from ..contract import DriftReport, ExampleAccount, Learned, ModelReport
from ..served import first_nonfinite
from .race.losses import ZeroOneLoss

__all__ = ["ServedPipeline", "drift_of", "float_or_none"]

#: Rows of a batch on which :meth:`ServedPipeline.nonfinite` checks the model's decisions.
PROBE_ROWS = 4


def float_or_none(value) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None (``gamma="scale"``
    before it is resolved)."""
    number = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    return float(value) if number else None


def drift_of(monitor, actionable: int | None = None) -> DriftReport:
    """The :class:`DriftReport` of a :class:`~svmstream.solvers.drift.DriftMonitor` (None: none)."""
    if monitor is None:
        return DriftReport()
    n = int(monitor.n_detections)
    return DriftReport(n, monitor.last_detection_at, n if actionable is None else actionable)


def _or_none(read):
    """``read()``, or None when the engine has no such part (a one-vs-rest BSCA engine keeps its
    coefficients and intercepts in its binary models: their margins and decisions are checked)."""
    try:
        return read()
    except AttributeError:
        return None


class ServedPipeline(ZeroOneLoss):
    """Mixin of :class:`~.pipeline.StreamingClassifier`: the :class:`~..contract.OnlineModel` names."""

    TASK: ClassVar[str] = "classification"
    HAS_CLASSES: ClassVar[bool] = True
    LEARNS_ONLINE: ClassVar[bool] = True

    def fitted(self) -> bool:
        """Whether it has learned (or started with) its first batch."""
        return self.__sklearn_is_fitted__()

    def report(self) -> ModelReport:
        """The pipeline's figures (:class:`~..contract.ModelReport`)."""
        if not self.fitted():
            return ModelReport(task=self.TASK, has_classes=self.HAS_CLASSES)
        model = self.model_
        statistics = {k: v for k, v in self.statistics().items() if k != "per_class"}
        pending = int(self.n_pending_)
        return ModelReport(
            task=self.TASK,
            has_classes=self.HAS_CLASSES,
            fitted=True,
            warming_up=bool(self.warming_up_),
            examples=ExampleAccount(int(self.n_received_), int(self.n_learned_), pending),
            n_features=int(model.n_features_in_),
            n_classes=int(model.classes_.shape[0]),
            n_support_vectors=int(model.n_support_vectors_),
            steps=int(statistics["steps"]),
            n_seen=int(statistics["examples_seen"]),
            gamma=float_or_none(model.gamma_),
            lambda_=float_or_none(
                getattr(model, "lambda_eff_", None)
            ),  # one-vs-rest BSCA: set at its first step
            scaling=self.scaling_,
            scaling_reason=self.scaling_reason_,
            n_replayed=int(self.n_replayed_),
            n_discarded=int(self.n_discarded_),
            drift=self.drift(),
            statistics=statistics,
        )

    def nonfinite(self, X=None) -> str | None:
        """The first non-finite part: the last margins, the dual coefficients (kernel models),
        the intercept, or the decisions on the first rows of ``X`` once it predicts and has
        taken a step (a linear model has no SVs: its decisions say it is finite); None."""
        if not self.fitted():
            return None
        parts = {
            "margins": self.last_margins_,
            "dual coefficients": _or_none(lambda: self.model_.dual_coef_),
            "intercept": _or_none(lambda: self.intercept_),
        }
        if X is not None and not self.warming_up_ and self.model_.t_:
            parts["decisions"] = self.decision_function(X[:PROBE_ROWS])
        return first_nonfinite(parts)

    def last_learned(self) -> Learned | None:
        """The prequential margins and labels of the received examples the last call learned."""
        if not self.fitted():
            return None
        return Learned(self.last_margins_, self.last_y_)

    def input_width(self) -> int | None:
        """``n_features_in_`` (None before the first batch)."""
        return int(self.model_.n_features_in_) if self.fitted() else None

    def class_count(self) -> int | None:
        """``len(classes_)`` (None before the first batch)."""
        return int(self.model_.classes_.shape[0]) if self.fitted() else None

    def serves(self) -> bool:
        """Fitted and out of its warm-up window."""
        return self.fitted() and not self.warming_up_

    def drift(self) -> DriftReport:
        """The drift stage's detections (none before the first batch)."""
        return drift_of(self._drift.monitor if "_drift" in self.__dict__ else None)

    def warm_start(self):
        """:meth:`~.pipeline_state.PipelineState.warm_copy` once it serves, else None."""
        return self.warm_copy() if self.serves() else None

    def serving_settings(self) -> dict[str, Any] | None:
        """None: a pipeline's settings are its configuration's."""
        return None

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """The warm-up window (:func:`~..budgeted.window_bytes`) and the arrays of the engine and
        the stages (:func:`~..budgeted.model_bytes`: SVs or weights, shuffle buffer, run guard,
        rehearsal memory when it rehearses) at width ``n_features`` with ``n_classes`` classes."""
        plain = self._plain()
        params = vars(plain)  # its parameters as set (get_params would inspect the signature: slow)
        kernel = "linear" if isinstance(plain, PegasosClassifier) else "rbf"
        memory = self.rehearsal_memory if self.rehearsal else 0
        return window_bytes(self.warmup, n_features) + model_bytes(
            params.get("budget", 2), n_features, self.shuffle_buffer, self.run_guard, max(2, int(n_classes)),
            params.get("maintenance", "merge"), kernel, params.get("sv_storage", "dense"), memory,
        )  # fmt: skip

    def published_copy(self):
        """A copy for predictions that shares what the learner never rewrites
        (:func:`..budgeted._publish.published_copy`); the drift monitor is shared (read for
        its counts only), the order stage shallow-copied (its counts)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.model_ = self.model_.published_copy()
        copy._calibration = self._calibration.published_copy()
        copy._scaler = self._scaler.published_copy()
        copy._order = _copy.copy(self._order)
        return copy
