"""The saved state of the streaming pipeline (a mixin of :class:`.pipeline.StreamingClassifier`)
and the warm copy made from it.

State: the engine's under ``model``, the stages' under ``stages`` (arrays ``pp_*`` of the
scaler and order stages, ``reh_*``, ``drift__*``, ``cal__*``), the pipeline's parameters and the
plain estimator's class and parameters (``plain``); older layouts pass :mod:`.upgrades` first.

Warm copy (:meth:`PipelineState.warm_copy`), the start of a drift challenger that continues
from the champion's support vectors instead of from nothing (``docs/challengers.md``).

The copy is the champion at the moment of the copy (its support vectors, coefficients,
scaling, γ, classes and calibration) with three changes that let it follow a new concept:

1. the rows in the champion's shuffle buffer are learned at once, in a random order (they
   were received before the detection; nothing is dropped), and the copy keeps no buffer
   (``shuffle_buffer=0``: a buffer would hold the new concept back);
2. its drift detector starts afresh (it has seen nothing since the detection);
3. its step-size schedule restarts at t = ``t0`` (:meth:`restart_schedule`), so the old model
   weighs like ``t0`` examples against the new ones.

Source: the warm start of a challenger from the champion is the "alternate tree grown from the
detection point" of CVFDT/HAT (Hulten, Spencer and Domingos, KDD 2001; Bifet and Gavaldà,
IDA 2009) applied to a budgeted kernel model.
"""

from __future__ import annotations

import copy

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..budgeted import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from ..budgeted._base import DRIFT_RESET_T0
from ..persistence import estimator_from_state
from .stages import CalibrationStage, DriftStage, OrderStage, RehearsalStage, ScalerStage
from .stages.weights import ClassWeightStage

__all__ = ["PipelineState", "resolve_scaling"]

#: The plain estimators, by name (saved states name them).
_PLAIN = {cls.__name__: cls for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier)}
#: Where the engines kept the drift stage's pending-reset flag before it left them (index
#: ``C_RESET_PENDING`` of ``counters``, or ``ovr_counters`` for one-vs-rest BSCA).
_LEGACY_RESET_FLAG = 6


def resolve_scaling(scaling, estimator):
    """The scaling a pipeline uses and why: ``(scaling, reason)``.

    ``"auto"`` with a numeric ``gamma`` on a kernel estimator is ``"none"``: the user's γ
    applies to the features as sent.  Otherwise ``scaling`` is kept (the scaler stage resolves
    ``"auto"`` from the warm-up window: max-abs, or none for text-like input).
    """
    if scaling != "auto":
        return scaling, "set explicitly"
    gamma = getattr(estimator, "gamma", "scale")
    if not isinstance(estimator, PegasosClassifier) and not isinstance(gamma, str):
        return "none", f"gamma={gamma:g} was given: it applies to the features as sent"
    if isinstance(estimator, PegasosClassifier):
        return "auto", "no gamma: max-abs from the warm-up window unless every value is within [-1, 1]"
    return "auto", 'gamma="scale": max-abs from the warm-up window, then gamma from the scaled window'


class PipelineState:
    """``get_state``/``from_state`` and ``warm_copy`` of the streaming pipeline."""

    #: The schedule restart of a warm-started copy: the old model weighs like this many examples
    #: (the drift reset's; 1,000 made ijcnn1's file-order seam cost 4.7 pp, docs/challengers.md).
    WARM_T0 = DRIFT_RESET_T0

    #: 3: the scaler and order stages saved under ``stages`` too (2: by the engine, in
    #: ``model``; 1 and 0: the rehearsal, drift and calibration stages as well,
    #: :mod:`.upgrades`)
    STATE_VERSION = 3

    def get_state(self):
        """``(arrays, meta)``: the engine's state under ``model``, the stages' under ``stages``
        (arrays ``pp_*`` of the scaler and order stages, ``reh_*``, ``drift__*``, ``cal__*``),
        this pipeline's parameters and the plain estimator's class and parameters."""
        check_is_fitted(self)
        arrays, model_meta = self.model_.get_state()
        parts = {
            "scaler": self._scaler.get_state(),
            "order": self._order.get_state(),
            "rehearsal": self._rehearsal.get_state(),
            "drift": self._drift.get_state(),
            "calibration": self._calibration.get_state(),
        }
        class_weights = self.__dict__.get("_class_weights")
        for part_arrays, _ in parts.values():
            arrays.update(part_arrays)
        plain = self._plain()
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"},
            "plain": {"class": type(plain).__name__, "params": plain.get_params()},
            "n_received": int(self.n_received_),
            "n_weightless": self.n_weightless_,
            "weights": {"sum": self.weight_received_, "weighted": self.weighted_},
            "model": model_meta,
            "stages": {
                **{name: part_meta for name, (_, part_meta) in parts.items()},
                "weights": None if class_weights is None else class_weights.get_state(),
            },
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state` (older layouts pass :mod:`.upgrades` first)."""
        model = estimator_from_state(arrays, {**meta["model"], "calibrates": False})  # the stage calibrates
        plain_meta = meta.get("plain") or _plain_of(model)
        face = _PLAIN[plain_meta["class"]]
        known = face._get_param_names()  # once: a get_params() per key cost ~4 ms a restore
        plain = face(**{k: v for k, v in plain_meta["params"].items() if k in known})
        est = cls(plain, **meta["params"])
        stages = meta["stages"]
        seed, d, n_classes = (
            RehearsalStage.seed_of(model.random_state),
            model.n_features_in_,
            model.classes_.shape[0],
        )
        rehearsal = stages.get("rehearsal")
        est._rehearsal = RehearsalStage.from_state(
            arrays, rehearsal, est.rehearsal, est.rehearsal_memory, seed, d
        )
        est._rehearsal.bind(model)  # binary models saved without a stage get one
        est.model_ = model
        est.scaling_reason_ = resolve_scaling(est.scaling, plain)[1]
        est._scaler = ScalerStage.from_state(arrays, stages["scaler"], d, n_classes)
        est._order = OrderStage.from_state(arrays, stages["order"], d, n_classes)
        est.n_weightless_ = int(meta.get("n_weightless", 0))
        est.n_received_ = int(meta["n_received"]) if "n_received" in meta else est.n_seen_
        weights = meta.get("weights") or {"sum": est.n_received_, "weighted": False}  # before weights: ones
        est.__dict__["_weight_sum"], est.__dict__["_weighted"] = (
            float(weights["sum"]),
            bool(weights["weighted"]),
        )
        est._drift = DriftStage.from_state(arrays, stages.get("drift"), est.on_drift)
        est._calibration = CalibrationStage.from_state(arrays, stages.get("calibration"), n_classes)
        est._class_weights = ClassWeightStage.from_state(stages.get("weights"), est.class_weight, n_classes)
        if stages.get("reset_flag_in_counters"):  # the engine held the pending reset
            counters = arrays["ovr_counters"] if "ovr_counters" in arrays else arrays["counters"]
            est._drift.pending = counters.shape[0] > _LEGACY_RESET_FLAG and bool(counters[_LEGACY_RESET_FLAG])
            model._counters[_LEGACY_RESET_FLAG:] = 0
        return est

    # ------------------------------------------------------------------ warm copy
    def warm_copy(self, t0: int | None = None):
        """A detached copy of this fitted pipeline (past its warm-up window) that has
        learned its buffered rows, keeps no buffer, has a fresh drift detector and a schedule
        restarted at ``t0`` (>= 1).  This pipeline is not changed.

        Returns the copy; its ``n_received_`` is the pipeline's and its ``n_pending_`` is 0.

        Raises
        ------
        ValueError
            This pipeline is still in its warm-up window, or ``t0`` < 1.
        """
        if self.warming_up_:
            raise ValueError("a warm copy needs a pipeline past its warm-up window")
        t0 = self.WARM_T0 if t0 is None else t0
        if int(t0) < 1:
            raise ValueError(f"t0 must be >= 1, got {t0!r}")
        arrays, meta = self.get_state()
        arrays = {k: np.array(v, copy=True) for k, v in arrays.items()}
        est = type(self).from_state(arrays, copy.deepcopy(meta))
        order = est._order
        est.model_.learn_rows(order.drain(None), rehearsal=est._rehearsal)
        order.shuffle_buffer, order.capacity = 0, 0
        order.buf_X, order.buf_y, order.buf_w = order.buf_X[:0], order.buf_y[:0], order.buf_w[:0]
        est.shuffle_buffer = 0
        est._drift = DriftStage(est.on_drift)
        est.model_.restart_schedule(t0)
        est._rehearsal.clear()
        est.__dict__.pop("_last", None)
        return est


def _plain_of(engine):
    """The plain estimator's class and parameters of a state saved without them (the engine
    is the plain estimator: :func:`.upgrades.engines_renamed`)."""
    return {"class": type(engine).__name__, "params": engine.get_params()}
