""":class:`ModelView`: an immutable published state of a model, read by predictions,
snapshots and ``GET /models`` without waiting for the learner.

The learner of a :class:`~svmstream.app.models.registry.ModelHandle` publishes a new view
after each applied batch, holding its estimator's ``published_copy()`` (what predictions
read, without the learner's buffers; batch-trained models: the estimator itself), and swaps
the handle's ``view`` reference; nobody mutates a published view.  Snapshots do not read the
view's estimator: they take the learner's state (``ModelHandle.capture_state``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from svmstream.app.errors import ModelNotFitted, ModelWarmingUp, NumericalOverflow
from svmstream.app.ingest.labels import LabelCodec
from svmstream.app.models.config import ModelConfig
from svmstream.solvers import WarmingUp

#: Rows of a batch on which the learner checks the model's decisions after learning.
PROBE_ROWS = 4


def check_finite(est, X=None) -> None:
    """Raise :class:`NumericalOverflow` if the estimator's last margins, coefficients,
    intercept or decisions on the first rows of ``X`` are not finite (public attributes only;
    a linear model has no support vectors: its decisions are probed once it has learned)."""
    parts = {
        "margins": getattr(est, "last_margins_", None),
        "dual coefficients": getattr(est, "dual_coef_", None),
        "intercept": getattr(est, "intercept_", None),
    }
    learned = getattr(est, "t_", 0)  # a linear model has no SVs: steps say it has learned
    if X is not None and not getattr(est, "warming_up_", False) and learned:
        parts["decisions"] = est.decision_function(X[:PROBE_ROWS])
    for what, values in parts.items():
        if values is not None and not np.isfinite(np.asarray(values, dtype=np.float64)).all():
            raise NumericalOverflow(
                f"numerical overflow: the batch made the model's {what} non-finite; it was not applied "
                "(lower C or the feature values, or raise lambda)",
                field="X",
            )


def estimator_stats(est) -> dict[str, Any]:
    """The figures of an estimator shown by ``GET /models`` and ``/metrics`` (``est`` may be None).

    Keys: ``n_support_vectors``, ``t``, ``n_merges``, ``n_seen``, ``lambda_eff``,
    ``gamma_eff`` (None while warming up), ``scaling`` (in use; None while warming up),
    ``warming_up``, ``pending`` (window + shuffle buffer), ``n_replayed``,
    ``merging_frequency``, ``average_weight_degradation``, ``drift`` (``detections``,
    ``last_at``: the example count of the last one, or None) and ``statistics`` (the
    estimator's ``statistics()`` without ``per_class``).
    """
    drift_monitor = getattr(est, "drift_", None)
    drift = {
        "detections": 0 if drift_monitor is None else int(drift_monitor.n_detections),
        "last_at": None if drift_monitor is None else drift_monitor.last_detection_at,
    }
    if est is None:
        return {
            "n_support_vectors": 0,
            "t": 0,
            "n_merges": 0,
            "n_seen": 0,
            "lambda_eff": None,
            "gamma_eff": None,
            "scaling": None,
            "warming_up": False,
            "pending": 0,
            "n_replayed": 0,
            "n_discarded": 0,
            "examples": {"received": 0, "learned": 0, "pending": 0},
            "scaling_reason": None,
            "merging_frequency": 0.0,
            "average_weight_degradation": 0.0,
            "drift": drift,
            "statistics": {},
        }
    lam = getattr(est, "lambda_eff_", None)
    statistics = est.statistics() if hasattr(est, "statistics") else {}
    statistics = {k: v for k, v in statistics.items() if k != "per_class"}
    return {
        "n_support_vectors": int(getattr(est, "n_support_vectors_", 0)),
        "t": int(statistics.get("steps", getattr(est, "t_", 0))),
        "n_merges": int(statistics.get("merges", getattr(est, "n_merges_", 0))),
        "n_seen": int(statistics.get("examples_seen", getattr(est, "n_seen_", 0))),
        "lambda_eff": None if lam is None else float(lam),
        "gamma_eff": _float_or_none(getattr(est, "gamma_", None)),
        "scaling": getattr(est, "scaling_", None),
        "warming_up": bool(getattr(est, "warming_up_", False)),
        "pending": int(getattr(est, "n_pending_", 0)),
        "n_replayed": int(getattr(est, "n_replayed_", 0)),
        "n_discarded": int(getattr(est, "n_discarded_", 0)),
        "examples": _example_counts(est),
        "scaling_reason": getattr(est, "scaling_reason_", None),
        "merging_frequency": float(statistics.get("merging_frequency", 0.0)),
        "average_weight_degradation": float(statistics.get("average_weight_degradation", 0.0)),
        "drift": drift,
        "statistics": statistics,
    }


def _example_counts(est) -> dict[str, int]:
    """Examples the model received, learned and holds pending (a batch-trained model: all of
    its training rows learned)."""
    if hasattr(est, "n_received_"):
        return {
            "received": int(est.n_received_),
            "learned": int(est.n_learned_),
            "pending": int(est.n_pending_),
        }
    n = int(getattr(est, "n_seen_", 0))
    return {"received": n, "learned": n, "pending": 0}


def _float_or_none(value) -> float | None:
    return (
        float(value) if isinstance(value, (int, float, np.floating)) and not isinstance(value, bool) else None
    )


@dataclass(frozen=True)
class ModelView:
    """An immutable published state of a model.

    Attributes
    ----------
    estimator : estimator or None
        A published copy nobody mutates (``None`` before the first batch): it predicts, it
        is not saved.
    version : int
        Number of batches applied since the model was created (survives restarts).
    n_features : int or None
        Input dimension ``d`` of the estimator.
    n_features_fixed : bool
        False while sparse input may still widen the model.
    stats : dict
        :func:`estimator_stats` of the estimator.
    extra : dict
        Caller metadata attached to applied batches (e.g. last stream entry ID).
    challengers : dict or None
        The challengers and promotion figures at this version
        (:meth:`~svmstream.app.models.challengers.ChallengerSet.info`), so that ``GET
        /models/{name}`` never shows a promotion before the examples that led to it; None: the
        model has no challengers, or the view was not published by the learner (then the live
        set is read).
    """

    name: str
    config: ModelConfig
    codec: LabelCodec
    estimator: Any | None
    version: int
    n_features: int | None
    stats: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    published_at: float = field(default_factory=time.time)
    n_features_fixed: bool = True
    challengers: dict[str, Any] | None = None
    #: the named-field schema (a FieldSchema, append-only: a version encodes with its columns
    #: below ``n_features``); None for a model of positional rows
    fields: Any = None

    def decision_function(self, X) -> np.ndarray:
        """Decision values, shape (n,), float64.  Raises :class:`~svmstream.app.errors.ModelNotFitted`.

        Safe to call from several threads at once on one view (the estimator's
        ``decision_function`` only reads the model; checked by
        ``tests/test_service_registry.py::test_concurrent_predictions_on_one_view_are_correct``).
        """
        if self.estimator is None:
            raise ModelNotFitted(f"model {self.name!r} has not learned from any example yet")
        try:
            return self.codec.public_decision(
                np.asarray(self.estimator.decision_function(X), dtype=np.float64)
            )
        except WarmingUp as exc:
            raise ModelWarmingUp(
                f"model {self.name!r}: {exc} (or POST /models/{self.name}/flush to learn what it holds now)"
            ) from None

    def predict_proba(self, X, decision: np.ndarray) -> tuple[list[Any], np.ndarray]:
        """``(classes, proba)``: the model's JSON labels and calibrated probabilities of shape
        (n, len(classes)), rows summing to 1, ``argmax`` = the label of ``decision``.

        A model that has seen a single label so far answers probability 1 for it.  Raises
        :class:`~svmstream.app.errors.ModelNotFitted` for a model without probabilities."""
        classes = self.codec.public_classes
        if len(classes) == 1:
            return classes, np.ones((decision.shape[0], 1))
        proba = getattr(self.estimator, "predict_proba", None)
        if proba is None:
            raise ModelNotFitted(f"model {self.name!r} has no calibrated probabilities")
        try:
            return classes, self.codec.public_columns(np.asarray(proba(X), dtype=np.float64))
        except WarmingUp as exc:
            raise ModelWarmingUp(f"model {self.name!r}: {exc}") from None

    def labels_from_decision(self, decision: np.ndarray) -> list[Any]:
        """Predicted JSON labels: ``classes[1]`` where decision > 0, else ``classes[0]``
        (the scikit-learn binary convention used by ``predict``); for a multi-class model
        (decision of shape (n, K), batch-trained one-vs-rest) the class of the largest score."""
        classes = self.codec.public_classes
        last = len(classes) - 1
        index = np.argmax(decision, axis=1) if decision.ndim == 2 else (decision > 0).astype(np.int64)
        return [classes[min(k, last)] for k in index.tolist()]
