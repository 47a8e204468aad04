"""What differs between tasks in the service, in one place: the prequential meter of a model and
the shape of its predictions (``/predict``, OIP v2, MLflow), one :class:`TaskOutput` per task,
chosen once per model by :data:`TASK_OUTPUTS` (keyed by the model's ``TASK``: the factory makes a
model of ``config.task``, ``tests/test_task_service.py`` checks they agree).

* classification: accuracy of the pre-update predictions; ``labels``, ``decision`` (and ``proba``);
* regression: MAE and RMSE of the pre-update predictions; ``values`` and, with ``"interval": q``,
  ``lower`` / ``upper`` (split-conformal, ``docs/regression.md``);
* novelty: the share of rows flagged when they arrived (and, for rows sent with 0/1 evaluation
  labels, the share of outliers flagged and of inliers flagged); ``scores`` (higher: more
  anomalous), ``outlier`` (score above the threshold of the stated false-alarm rate) and
  ``threshold`` (``docs/novelty.md``).

The meters keep rings of the last ``size`` values (the ``metrics_window`` setting), as
:class:`~.meters.PrequentialWindow` does for accuracy.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from svmstream.app.errors import InvalidInput
from svmstream.app.models.meters import PrequentialWindow, correct_predictions


class ValueRing:
    """The last ``size`` float64 values (a ring that grows with what it holds), their count and
    the count of all values added."""

    __slots__ = ("size", "_buf", "_pos", "_count", "total", "_lock")

    def __init__(self, size: int):
        self.size = int(size)
        self._buf = np.zeros(0)
        self._pos = 0
        self._count = 0
        self.total = 0
        self._lock = threading.Lock()

    def add(self, values: np.ndarray) -> None:
        v = np.asarray(values, dtype=np.float64)[-self.size :]
        with self._lock:
            self.total += int(np.asarray(values).shape[0])
            if self._buf.shape[0] < self.size:
                self._buf = np.concatenate([self._buf, v])[-self.size :]
                self._count = self._buf.shape[0]
                self._pos = self._count % self.size
                return
            idx = (self._pos + np.arange(v.shape[0])) % self.size
            self._buf[idx] = v
            self._pos = int((self._pos + v.shape[0]) % self.size)

    def values(self) -> np.ndarray:
        with self._lock:
            return self._buf.copy()

    def count(self) -> int:
        return self._count


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if values.shape[0] else None


class _Meter:
    """A task's prequential meter: :meth:`add` what the model learned, :meth:`figures`; the
    accuracy of a model without classes is None (``/metrics``, the dashboard read it)."""

    size: int

    def accuracy(self) -> float | None:
        return None


class ErrorMeter(_Meter):
    """Absolute errors of a regressor's pre-update predictions, and whether each target fell in
    the 90 % interval the model stated before the batch (its prequential coverage)."""

    def __init__(self, size: int):
        self.size = int(size)
        self.errors = ValueRing(size)
        self.covered = ValueRing(size)
        self._half: float | None = None  # the 90 % half-width after the last batch

    def add(self, outputs, targets, est) -> None:
        errors = np.abs(np.asarray(targets, dtype=np.float64) - np.asarray(outputs, dtype=np.float64))
        self.errors.add(errors)
        if self._half is not None:
            self.covered.add((errors <= self._half).astype(np.float64))
        self._half = est.report().metrics.get("interval_90_half_width")

    def count(self) -> int:
        return self.errors.count()

    def figures(self) -> dict[str, Any]:
        e = self.errors.values()
        return {
            "prequential_mae": _mean(e),
            "prequential_rmse": math.sqrt(float(np.mean(e**2))) if e.shape[0] else None,
            "prequential_coverage_90": _mean(self.covered.values()),
        }


class OutlierMeter(_Meter):
    """Whether each row was flagged when it arrived (score above the threshold the model states
    after the batch), and its evaluation label (NaN: none)."""

    def __init__(self, size: int):
        self.size = int(size)
        self.flags = ValueRing(size)
        self.labels = ValueRing(size)

    def add(self, outputs, targets, est) -> None:
        threshold = est.report().metrics.get("threshold")
        scores = np.asarray(outputs, dtype=np.float64)
        flagged = scores > threshold if threshold is not None else np.zeros(scores.shape[0], dtype=bool)
        self.flags.add(flagged.astype(np.float64))
        self.labels.add(np.asarray(targets, dtype=np.float64))

    def count(self) -> int:
        return self.flags.count()

    def figures(self) -> dict[str, Any]:
        flags, labels = self.flags.values(), self.labels.values()
        out = {"prequential_outlier_rate": _mean(flags)}
        known = np.isfinite(labels)
        if known.any():
            out["evaluation_outliers_flagged"] = _mean(flags[known & (labels == 1)])
            out["evaluation_inliers_flagged"] = _mean(flags[known & (labels == 0)])
        return out


class ClassMeter(_Meter):
    """Accuracy of a classifier's pre-update predictions (:class:`PrequentialWindow`)."""

    def __init__(self, size: int):
        self.window = PrequentialWindow(size)
        self.size = self.window.size

    def add(self, outputs, targets, est) -> None:
        self.window.add(correct_predictions(outputs, np.asarray(targets, dtype=np.int64)))

    def accuracy(self) -> float | None:
        return self.window.accuracy()

    def count(self) -> int:
        return self.window.count()

    def figures(self) -> dict[str, Any]:
        return {"prequential_accuracy": self.window.accuracy()}


def interval_level(obj: dict) -> float | None:
    """The body's ``interval`` (a number strictly between 0 and 1) or None; InvalidInput naming it."""
    level = obj.get("interval")
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise InvalidInput(
            "interval: must be a coverage level strictly between 0 and 1 (e.g. 0.9)", field="interval"
        )
    return float(level)


class TaskOutput:
    """Classification: labels and decision values (the service as it always was)."""

    task = "classification"
    meter = ClassMeter
    #: the names and datatypes of :meth:`tensors` (none: a classifier's outputs)
    tensor_types: tuple[tuple[str, str], ...] = ()

    def tensors(self, view, X, decision) -> dict[str, tuple[str, np.ndarray]] | None:
        """The protocols' outputs (OIP v2, MLflow ``/invocations``) of a model without classes:
        ``name -> (datatype, values)``, the first the ``label`` output of MLflow; None: a
        classifier's (labels, decision, proba, classes; :mod:`svmstream.app.api.protocols`)."""
        return None

    def refuse(self, obj: dict) -> None:
        if obj.get("interval") is not None:
            raise InvalidInput(f"interval: a {self.task} model has no prediction intervals", field="interval")

    def served(self, out: dict[str, Any]) -> list[Any]:
        """What an answer ``out`` served per row, as remembered for ``/feedback``: the labels
        (a regressor: the values; a novelty model: the outlier flags)."""
        return out["labels"]

    def answer(self, view, X, decision: np.ndarray, obj: dict) -> dict[str, Any]:
        """The task's fields of a prediction answer for rows X and their decision values."""
        self.refuse(obj)
        out = {"labels": view.labels_from_decision(decision), "decision": np.ascontiguousarray(decision)}
        if obj.get("proba"):
            classes, proba = view.predict_proba(X, decision)
            out["classes"], out["proba"] = classes, np.ascontiguousarray(proba)
        return out


class ValueOutput(TaskOutput):
    """Regression: ``values`` (the decision values are the predictions), ``lower``/``upper``."""

    task = "regression"
    meter = ErrorMeter
    tensor_types = (("value", "FP64"),)

    def answer(self, view, X, decision, obj):
        if obj.get("proba"):
            raise InvalidInput("proba: a regression model has no class probabilities", field="proba")
        level = interval_level(obj)
        out: dict[str, Any] = {"values": np.ascontiguousarray(decision)}  # ŷ on the target's scale
        if level is not None:
            lower, upper = view.estimator.predict_interval(X, level)
            out["interval"] = level
            out["lower"], out["upper"] = np.ascontiguousarray(lower), np.ascontiguousarray(upper)
        return out

    def tensors(self, view, X, decision):
        return {"value": ("FP64", np.ascontiguousarray(decision, dtype=np.float64))}

    def served(self, out):
        return np.asarray(out["values"]).tolist()


class ScoreOutput(TaskOutput):
    """Novelty: ``scores`` (higher: more anomalous), ``outlier`` and the ``threshold``."""

    task = "novelty"
    meter = OutlierMeter
    tensor_types = (("outlier", "BOOL"), ("score", "FP64"))

    def answer(self, view, X, decision, obj):
        if obj.get("proba"):
            raise InvalidInput("proba: a novelty model has no class probabilities", field="proba")
        self.refuse(obj)
        scores = np.asarray(view.estimator.score_samples(X), dtype=np.float64)
        threshold = view.estimator.report().metrics.get("threshold")
        return {
            "scores": np.ascontiguousarray(scores),
            "outlier": (np.asarray(decision) < 0).tolist(),
            "threshold": threshold,
        }

    def served(self, out):
        return out["outlier"]

    def tensors(self, view, X, decision):
        scores = np.asarray(view.estimator.score_samples(X), dtype=np.float64)
        return {
            "outlier": ("BOOL", np.asarray(decision) < 0),
            "score": ("FP64", np.ascontiguousarray(scores)),
        }


#: The output of each task (by the model's ``TASK``).
TASK_OUTPUTS: dict[str, TaskOutput] = {o.task: o for o in (TaskOutput(), ValueOutput(), ScoreOutput())}


def output_of(config) -> TaskOutput:
    """The :class:`TaskOutput` of a model of configuration ``config`` (its task)."""
    return TASK_OUTPUTS[config.task]
