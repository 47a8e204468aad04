"""The streaming pipeline: the stages a service puts around a plain budgeted estimator.

A stream differs from a data set: users send raw features in the order they have them (often
sorted by label), rarely know γ, and never see the end.  :class:`StreamingClassifier` wraps a
plain estimator (:class:`~svmstream.solvers.BudgetedSGDClassifier`,
:class:`~svmstream.solvers.BudgetedSCAClassifier`, :class:`~svmstream.solvers.PegasosClassifier`)
in these stages, in this order (``docs/online.md``, ``docs/defaults.md``):

1. **scaler** — a warm-up window of ``warmup`` examples fixes the feature scaling (max-abs,
   standard, none) and ``gamma="scale"``; ``scaling="auto"`` is ``"none"`` when the estimator
   has a numeric ``gamma`` (a γ applies to the features as the user sends them);
2. **order** — a shuffle buffer of ``shuffle_buffer`` rows and the run guard for label-sorted
   streams;
3. **rehearsal** — ``rehearsal`` extra steps per learned example on rows from a reservoir;
4. the estimator's own step;
5. **drift** — a detector on the prequential errors; ``on_drift="reset_schedule"`` restarts the
   step-size schedule.  A detection never discards an example: everything received is
   learned (buffered rows included) or still pending;
6. **calibration** — decision values → probabilities.

The rehearsal, drift and calibration stages are modules of their own
(:mod:`.stages.rehearsal`, :mod:`.stages.drift`, :mod:`.stages.calibration`), each with its
state and its part of the saved state (``stages``); this class feeds the last two the
prequential margins the estimator computes, cuts each batch into the drift stage's pieces, and
hands the rehearsal stage to the estimator (it plans extra steps on the rows the order stage
releases).  The scaler and order stages still run inside the budgeted family's engine
(:mod:`..budgeted._preprocessing`, the engines of :mod:`..budgeted._classes`): this class
builds the engine from the plain estimator's parameters and their settings, and the saved
state keeps them apart (``params``, ``plain``, ``model``, ``stages``).  Every example received is counted:
``n_received_ = n_learned_ + n_pending_`` at every moment.

Source of the composition: River's ``compose.Pipeline`` and scikit-learn's ``Pipeline``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_X_y, validate_data

from .._params import (
    DEFAULT_REHEARSAL,
    DEFAULT_REHEARSAL_MEMORY,
    DEFAULT_SHUFFLE_BUFFER,
    DEFAULT_WARMUP,
    ON_DRIFT,
    SCALINGS,
)
from ..budgeted import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier, StreamingBSCA
from ..persistence import estimator_from_state, register_estimator, register_upgrade
from .stages import CalibrationStage, DriftStage, RehearsalStage

#: The settings of the stages that left the engines (states of version 0 saved them there).
_MOVED = ("on_drift", "rehearsal", "rehearsal_memory")
#: Where the engines kept the drift stage's pending-reset flag before it left them (index
#: ``C_RESET_PENDING`` of ``counters``, or ``ovr_counters`` for one-vs-rest BSCA).
_LEGACY_RESET_FLAG = 6

#: Fitted attributes read through to the engine (what the service and users read of a model).
DELEGATED = (
    "classes_",
    "n_features_in_",
    "n_support_vectors_",
    "t_",
    "n_seen_",
    "n_pending_",
    "n_replayed_",
    "n_discarded_",
    "n_rehearsed_",
    "n_merges_",
    "n_violations_",
    "n_maintenance_",
    "warming_up_",
    "gamma_",
    "scaling_",
    "lambda_eff_",
    "C_eff_",
    "support_vectors_",
    "dual_coef_",
    "intercept_",
    "coef_",
    "sv_storage_",
    "sv_nonzeros_",
    "estimators_",
    "weight_degradation_total_",
    "maintenance_seconds_",
    "merge_diagnostics_",
)

#: The plain faces, by name (saved states name them).
_FACES = {cls.__name__: cls for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier)}


def _read_through(name):
    def read(self):
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"{type(self).__name__} has no {name} before it has learned")
        return getattr(model, name)

    read.__name__ = name
    read.__doc__ = f"The engine's ``{name}``."
    return property(read)


def resolve_scaling(scaling, estimator):
    """The scaling a pipeline uses and why: ``(scaling, reason)``.

    ``"auto"`` with a numeric ``gamma`` on a kernel estimator is ``"none"``: the user's γ
    applies to the features as sent.  Otherwise ``scaling`` is kept (the engine resolves
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


@register_estimator
class StreamingClassifier(ClassifierMixin, BaseEstimator):
    """A plain budgeted estimator inside the streaming stages (scaler, order, rehearsal, drift,
    calibration) — the model the service keeps for each name.

    Parameters
    ----------
    estimator : BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier or None
        The plain estimator; None: ``BudgetedSGDClassifier()``.  Its parameters are used as
        given (it is cloned, never fitted itself).
    scaling : {"auto", "maxabs", "standard", "none"}, default="auto"
        Feature scaling frozen from the warm-up window; ``"auto"`` is ``"none"`` for a numeric
        ``gamma`` and max-abs otherwise (:func:`resolve_scaling`).
    warmup : int >= 0, default=1000
        Examples held before the scaling and ``gamma="scale"`` are fixed (predictions raise
        ``WarmingUp`` before); not used when nothing needs fixing.
    shuffle_buffer : int >= 0, default=20000
        Rows of the shuffle buffer (0: the stream's order is kept).
    run_guard : bool, default=True
        Replay examples of other classes during improbably long one-class runs.
    rehearsal : int >= 0, default=1
        Extra steps per learned example on rows drawn from a reservoir of the stream.
    rehearsal_memory : int >= 0, default=20000
        Rows remembered for rehearsal (at most 16 MiB).
    on_drift : {"reset_schedule", "none"}, default="reset_schedule"
        What a drift detection does: restart the step-size schedule, or only count it.
        Neither discards an example.

    Attributes
    ----------
    model_ : the engine (stages and estimator state); scaling_reason_ : str
    n_received_, n_learned_ : int — examples received and learned (``n_received_ =
        n_learned_ + n_pending_``); plus the engine's attributes in :data:`DELEGATED`

    Raises
    ------
    ValueError
        On an invalid parameter (naming it), non-finite input or an unknown label.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers import BudgetedSGDClassifier
    >>> from svmstream.solvers.online import StreamingClassifier
    >>> X, y = make_moons(n_samples=400, noise=0.2, random_state=0)
    >>> stream = StreamingClassifier(BudgetedSGDClassifier(budget=50, random_state=0), warmup=100)
    >>> for start in range(0, 300, 50):
    ...     stream = stream.partial_fit(X[start : start + 50], y[start : start + 50], classes=[0, 1])
    >>> stream.n_received_ == stream.n_learned_ + stream.n_pending_, stream.flush().n_pending_
    (True, 0)
    >>> round(stream.score(X[300:], y[300:]), 2)
    0.93
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["partial_fit", "engine_params"]), None],
        "scaling": [StrOptions(set(SCALINGS))],
        "warmup": [Interval(Integral, 0, None, closed="left")],
        "shuffle_buffer": [Interval(Integral, 0, None, closed="left")],
        "run_guard": ["boolean"],
        "rehearsal": [Interval(Integral, 0, None, closed="left")],
        "rehearsal_memory": [Interval(Integral, 0, None, closed="left")],
        "on_drift": [StrOptions(set(ON_DRIFT))],
    }

    def __init__(
        self,
        estimator=None,
        *,
        scaling="auto",
        warmup=DEFAULT_WARMUP,
        shuffle_buffer=DEFAULT_SHUFFLE_BUFFER,
        run_guard=True,
        rehearsal=DEFAULT_REHEARSAL,
        rehearsal_memory=DEFAULT_REHEARSAL_MEMORY,
        on_drift="reset_schedule",
    ):
        self.estimator = estimator
        self.scaling = scaling
        self.warmup = warmup
        self.shuffle_buffer = shuffle_buffer
        self.run_guard = run_guard
        self.rehearsal = rehearsal
        self.rehearsal_memory = rehearsal_memory
        self.on_drift = on_drift

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        return "model_" in self.__dict__ and hasattr(self.model_, "classes_")

    # ------------------------------------------------------------------ the engine
    def _plain(self):
        return self.estimator if self.estimator is not None else BudgetedSGDClassifier()

    def stage_params(self):
        """The settings of the stages the engine runs (scaler, order), as the engine takes them
        (``scaling`` resolved)."""
        params = {name: getattr(self, name) for name in StreamingBSCA.STAGE_PARAMS}
        params["scaling"], _ = resolve_scaling(self.scaling, self._plain())
        return params

    def check_params(self):
        """Validate this pipeline's and the estimator's parameters; returns self.  Raises
        ValueError naming the parameter."""
        self._validate_params()
        for name in ("rehearsal", "rehearsal_memory"):  # bool is an Integral to the constraints
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)):
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        self._new_engine().check_params()
        return self

    def _new_engine(self):
        plain = self._plain()
        if type(plain).__name__ not in _FACES:
            raise ValueError(f"estimator must be one of {', '.join(_FACES)}, got {type(plain).__name__}")
        plain.check_params()
        params = plain.engine_params()
        params.update(self.stage_params())
        engine = plain.ENGINE(**params)
        engine._calibrates = False  # the calibration stage calibrates
        seed = RehearsalStage.seed_of(engine.random_state)
        RehearsalStage(self.rehearsal, self.rehearsal_memory, seed).attach(engine)
        return engine

    def _start(self):
        self.check_params()
        self.model_ = self._new_engine()
        self.scaling_reason_ = resolve_scaling(self.scaling, self._plain())[1]
        self.n_received_ = 0
        self._drift = DriftStage(self.on_drift)
        self._calibration = None  # made when the classes are known

    def _observe(self):
        """Feed the margins the engine computed before its last steps on received examples
        (``last_margins_``, ``last_y_``) to the calibration and drift stages."""
        model = self.model_
        if self._calibration is None:
            self._calibration = CalibrationStage(model.classes_.shape[0])
        margins = model.last_margins_
        if margins.shape[0] == 0:
            return
        y_index = np.searchsorted(model.classes_, model.last_y_)
        self._calibration.observe(margins, y_index)
        self._drift.observe(margins, y_index)

    def _checked(self, X, y, classes, first):
        """The batch validated as a whole before any piece is learned (the model is unchanged
        by a batch that raises).  Raises ValueError as the engine's ``partial_fit``."""
        X, y = validate_data(self.model_, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
        if not first:
            self.model_._encode_labels(y)
        elif classes is not None:
            known = np.unique(np.asarray(classes))
            index = np.minimum(np.searchsorted(known, y), known.shape[0] - 1)
            bad = np.flatnonzero(known[index] != y)
            if bad.size:
                label = y[bad[0]].item() if isinstance(y[bad[0]], np.generic) else y[bad[0]]
                raise ValueError(f"y[{int(bad[0])}]: unknown label {label!r}; classes are {known.tolist()}")
        return X, y

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None):
        """Receive a batch: it passes the stages and is learned, or stays pending (window,
        buffer).  ``classes`` is required on the first call.  Returns self.

        X : (n, d) array-like or CSR, float64; y : (n,) labels.  Raises ValueError on
        invalid input; the model is unchanged then."""
        first = not self.__sklearn_is_fitted__()
        if first:
            self._start()
        model = self.model_
        self.__dict__.pop("_last", None)
        if self.on_drift == "none":  # no reset to place: the engine takes the batch whole
            model.partial_fit(X, y, classes=classes)
            self._observe()
        else:
            X, y = self._checked(X, y, classes, first)
            margins, learned = [], []
            for lo, hi in self._drift.pieces(model.n_seen_ if not first else 0, y.shape[0]):
                model.partial_fit(X[lo:hi], y[lo:hi], classes=classes)
                self._observe()
                margins.append(model.last_margins_)
                learned.append(model.last_y_)
                if self._drift.reset_due(model.n_seen_):
                    model.restart_schedule()
            if len(margins) > 1:
                self._last = (np.concatenate(margins), np.concatenate(learned))
        self.n_received_ += int(np.shape(y)[0])
        return self

    def fit(self, X, y):
        """From scratch: ``partial_fit(X, y, classes=np.unique(y))`` then :meth:`flush` — the
        same model as the service learns from the same rows in the same order.  Returns self."""
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self._start()
        return self.partial_fit(X, y, classes=np.unique(y)).flush()

    def flush(self):
        """Learn everything pending now (the end of a stream).  Returns self."""
        check_is_fitted(self)
        self.__dict__.pop("_last", None)
        self.model_.flush()
        self._observe()
        return self

    def grow_features(self, n_features):
        """Widen to ``n_features`` inputs (a missing feature is a zero).  Returns self."""
        check_is_fitted(self)
        d_old = self.model_.n_features_in_
        self.model_.grow_features(n_features)
        if int(n_features) > d_old:
            self.__dict__.pop("_last", None)
        if int(n_features) > d_old:  # buffered rows beyond the buffer's new bound were learned
            self._observe()
        return self

    def add_class(self, label):
        """Add a class the model has not seen.  Returns self."""
        check_is_fitted(self)
        self.model_.add_class(label)
        self.__dict__.pop("_last", None)
        self._calibration.add_class()
        return self

    @property
    def n_learned_(self):
        """Received examples that were learned (rehearsal and run-guard replays not counted)."""
        check_is_fitted(self)
        return int(self.model_.n_seen_) - int(self.model_.n_pending_) - int(self.model_.n_discarded_)

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

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """(n,) float64 for binary models, (n, n_classes) otherwise."""
        check_is_fitted(self)
        return self.model_.decision_function(X)

    def predict(self, X):
        """(n,) labels from ``classes_``."""
        check_is_fitted(self)
        return self.model_.predict(X)

    def predict_proba(self, X):
        """(n, n_classes) float64 calibrated probabilities (argmax = :meth:`predict`)."""
        check_is_fitted(self)
        return self._calibration.predict_proba(self.model_.decision_function(X))

    def statistics(self):
        """The engine's counters (dict)."""
        check_is_fitted(self)
        return self.model_.statistics()

    def published_copy(self):
        """A copy for predictions that shares what the learner never rewrites
        (:func:`..budgeted._publish.published_copy`); the drift monitor is shared (read for
        its counts only)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.model_ = self.model_.published_copy()
        copy._calibration = self._calibration.published_copy()
        return copy

    # ------------------------------------------------------------------ persistence
    #: 2: the rehearsal, drift and calibration stages saved under ``stages`` (1: by the engine, in
    #: ``model``; 0: a state saved by an engine that carried every stage, see :func:`legacy_state`)
    STATE_VERSION = 2

    def get_state(self):
        """``(arrays, meta)``: the engine's state under ``model``, the rehearsal, drift and
        calibration stages' under ``stages`` (arrays ``reh_*``/``drift__*``/``cal__*``), this pipeline's
        parameters and the plain estimator's class and parameters."""
        check_is_fitted(self)
        arrays, model_meta = self.model_.get_state()
        drift_arrays, drift_meta = self._drift.get_state()
        cal_arrays, cal_meta = self._calibration.get_state()
        reh_arrays, reh_meta = self.model_._rehearsal.get_state()
        arrays.update(drift_arrays)
        arrays.update(cal_arrays)
        arrays.update(reh_arrays)
        plain = self._plain()
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"},
            "plain": {"class": type(plain).__name__, "params": plain.get_params()},
            "n_received": int(self.n_received_),
            "model": model_meta,
            "stages": {"rehearsal": reh_meta, "drift": drift_meta, "calibration": cal_meta},
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state`, or from an older layout (:func:`legacy_state`,
        :func:`stages_out_of_the_engine`)."""
        model = estimator_from_state(arrays, meta["model"])
        plain_meta = meta.get("plain") or _plain_of(model)
        face = _FACES[plain_meta["class"]]
        plain = face(**{k: v for k, v in plain_meta["params"].items() if k in face().get_params()})
        params = meta["params"]
        if meta["state_version"] == 0:  # saved by an engine: its own settings, as they were
            params = {name: getattr(model, name) for name in StreamingBSCA.STAGE_PARAMS}
            params.update({name: meta["params"][name] for name in _MOVED if name in meta["params"]})
        est = cls(plain, **params)
        stages = meta.get("stages", {})
        seed, d = RehearsalStage.seed_of(model.random_state), model.n_features_in_
        rehearsal = stages.get("rehearsal")
        RehearsalStage.from_state(arrays, rehearsal, est.rehearsal, est.rehearsal_memory, seed, d).attach(
            model
        )
        est.model_ = model
        est.scaling_reason_ = resolve_scaling(est.scaling, plain)[1]
        est.n_received_ = int(meta.get("n_received", model.n_seen_))
        est._drift = DriftStage.from_state(arrays, stages.get("drift"), est.on_drift)
        n_classes = model.classes_.shape[0]
        est._calibration = CalibrationStage.from_state(arrays, stages.get("calibration"), n_classes)
        if stages.get("reset_flag_in_counters"):  # the engine held the pending reset
            counters = arrays["ovr_counters"] if "ovr_counters" in arrays else arrays["counters"]
            est._drift.pending = counters.shape[0] > _LEGACY_RESET_FLAG and bool(counters[_LEGACY_RESET_FLAG])
            model._counters[_LEGACY_RESET_FLAG:] = 0
        model._calibrates, model.calibrator_ = False, None
        return est


def _plain_of(engine):
    """The plain face's class and parameters of an engine saved before the split."""
    if isinstance(engine, StreamingBSCA):
        name = "BudgetedSCAClassifier"
    else:
        name = "PegasosClassifier" if engine.kernel == "linear" else "BudgetedSGDClassifier"
    return {"class": name, "params": engine.get_params()}


@register_upgrade
def legacy_state(meta):
    """A state saved by a budgeted estimator that still carried the stages (state version
    ≤ 6 under the names ``BudgetedSGDClassifier``/``BudgetedSCAClassifier``) as the meta of a
    :class:`StreamingClassifier` around its engine (its ``on_drift``: as saved, ``"none"``
    for states saved before drift handling); any other meta unchanged."""
    engines = {"BudgetedSGDClassifier": "StreamingBSGD", "BudgetedSCAClassifier": "StreamingBSCA"}
    if meta.get("estimator") not in engines or int(meta.get("state_version", 0)) > 6:
        return meta
    params = meta.get("params", {})
    stages = {name: params[name] for name in StreamingBSCA.STAGE_PARAMS if name in params}
    stages["on_drift"] = params.get("on_drift", "none") if int(meta.get("state_version", 0)) > 4 else "none"
    stages["rehearsal"] = params.get("rehearsal", 0)  # saved before rehearsal existed: off
    stages["rehearsal_memory"] = params.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY)
    return {
        "estimator": "StreamingClassifier",
        "state_version": 0,
        "params": stages,
        "model": {**meta, "estimator": engines[meta["estimator"]]},
    }


@register_upgrade
def stages_out_of_the_engine(meta):
    """A :class:`StreamingClassifier` state of version 0 or 1, whose engine saved the rehearsal
    memories, the drift monitor and the calibrator (``model["rehearsal"]``, each binary
    model's ``"rehearsal"`` and settings, ``model["drift"]``, ``model["calibration"]``; arrays
    ``reh_*``, ``ovr{k}__reh_*``, ``drift__*``, ``cal__*`` — the names the stages use) and the
    pending-reset flag (in its counters), as the meta of version 2: the metas move under
    ``stages``, the flag is read from the counters on loading; any other meta unchanged."""
    if meta.get("estimator") != "StreamingClassifier" or int(meta.get("state_version", 0)) > 1:
        return meta
    model = dict(meta["model"])
    drift = model.pop("drift", None)
    stages = {
        "rehearsal": {"memory": model.pop("rehearsal", None), "children": []},
        "drift": None if drift is None else {"monitor": drift, "pending": False},
        "calibration": model.pop("calibration", None),
        "reset_flag_in_counters": True,
    }
    if model.get("ovr"):  # one-vs-rest: each binary model's memory and settings
        model["ovr"] = [None if sub is None else dict(sub) for sub in model["ovr"]]
        for sub in model["ovr"]:
            if sub is None:
                stages["rehearsal"]["children"].append(None)
                continue
            sub_params = sub["params"]
            stages["rehearsal"]["children"].append(
                {
                    "rehearsal": sub_params.get("rehearsal", 0),
                    "rehearsal_memory": sub_params.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY),
                    "seed": RehearsalStage.seed_of(sub_params.get("random_state")),
                    "memory": sub.pop("rehearsal", None),
                }
            )
    return {**meta, "model": model, "stages": stages}


for _name in DELEGATED:
    setattr(StreamingClassifier, _name, _read_through(_name))
