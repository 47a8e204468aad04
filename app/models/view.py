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
from svmstream.solvers.contract import ModelReport


def check_finite(est, X=None) -> None:
    """Raise :class:`NumericalOverflow` if the model says a part of it is not finite
    (``nonfinite(X)`` of the contract: its last margins, coefficients, intercept, or its
    decisions on the first rows of ``X``)."""
    what = est.nonfinite(X)
    if what is not None:
        raise NumericalOverflow(
            f"numerical overflow: the batch made the model's {what} non-finite; it was not applied "
            "(lower C or the feature values, or raise lambda)",
            field="X",
        )


def estimator_stats(est) -> dict[str, Any]:
    """The figures of a model shown by ``GET /models`` and ``/metrics`` (``est`` may be None):
    :func:`report_stats` of its ``report()``."""
    return report_stats(None if est is None else est.report())


def report_stats(report: ModelReport | None) -> dict[str, Any]:
    """The figures ``GET /models`` and ``/metrics`` show of a :class:`ModelReport` (None: no model).

    Keys: ``n_support_vectors``, ``t``, ``n_merges``, ``n_seen``, ``lambda_eff``,
    ``gamma_eff`` (None while warming up), ``scaling`` (in use; None while warming up),
    ``warming_up``, ``pending`` (window + shuffle buffer), ``n_replayed``, ``n_discarded``,
    ``examples`` (``received``, ``learned``, ``pending``), ``scaling_reason``,
    ``merging_frequency``, ``average_weight_degradation``, ``drift`` (``detections``,
    ``last_at``: the example count of the last one, or None) and ``statistics`` (the model's
    counters without ``per_class``) and, when the model keeps any, ``metrics`` (the model's own figures: a
    regressor's recent MAE and interval half-width, a novelty model's threshold).
    """
    report = ModelReport() if report is None else report
    statistics = dict(report.statistics)
    return {
        "n_support_vectors": int(report.n_support_vectors),
        "t": int(report.steps),
        "n_merges": int(statistics.get("merges", 0)),
        "n_seen": int(report.n_seen),
        "lambda_eff": report.lambda_,
        "gamma_eff": report.gamma,
        "scaling": report.scaling,
        "warming_up": bool(report.warming_up),
        "pending": int(report.examples.pending),
        "n_replayed": int(report.n_replayed),
        "n_discarded": int(report.n_discarded),
        "examples": report.examples.as_dict(),
        "scaling_reason": report.scaling_reason,
        "merging_frequency": float(statistics.get("merging_frequency", 0.0)),
        "average_weight_degradation": float(statistics.get("average_weight_degradation", 0.0)),
        "drift": {"detections": int(report.drift.detections), "last_at": report.drift.last_at},
        "statistics": statistics,
        # the model's own figures (a regressor's, a novelty model's; none of a classifier)
        **({"metrics": dict(report.metrics)} if report.metrics else {}),
    }


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
