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

The stages' code still lives in the budgeted family's engine (:mod:`..budgeted._preprocessing`,
:mod:`..budgeted._rehearsal`, the engines of :mod:`..budgeted._classes`): this class builds the
engine from the plain estimator's parameters and its own, and the saved state keeps the two
apart (``params``, ``estimator``, ``model``).  Every example received is counted:
``n_received_ = n_learned_ + n_pending_`` at every moment.

Source of the composition: River's ``compose.Pipeline`` and scikit-learn's ``Pipeline``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_X_y

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
    "drift_",
    "calibrator_",
    "last_margins_",
    "last_y_",
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
        """The stages' settings as the engine takes them (``scaling`` resolved)."""
        params = {name: getattr(self, name) for name in StreamingBSCA.STAGE_PARAMS}
        params["scaling"], _ = resolve_scaling(self.scaling, self._plain())
        return params

    def check_params(self):
        """Validate this pipeline's and the estimator's parameters; returns self.  Raises
        ValueError naming the parameter."""
        self._validate_params()
        self._new_engine().check_params()
        return self

    def _new_engine(self):
        plain = self._plain()
        if type(plain).__name__ not in _FACES:
            raise ValueError(f"estimator must be one of {', '.join(_FACES)}, got {type(plain).__name__}")
        plain.check_params()
        params = plain.engine_params()
        params.update(self.stage_params())
        return plain.ENGINE(**params)

    def _start(self):
        self.check_params()
        self.model_ = self._new_engine()
        self.scaling_reason_ = resolve_scaling(self.scaling, self._plain())[1]
        self.n_received_ = 0

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None):
        """Receive a batch: it passes the stages and is learned, or stays pending (window,
        buffer).  ``classes`` is required on the first call.  Returns self.

        X : (n, d) array-like or CSR, float64; y : (n,) labels.  Raises ValueError on
        invalid input; the model is unchanged then."""
        if not self.__sklearn_is_fitted__():
            self._start()
        self.model_.partial_fit(X, y, classes=classes)
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
        self.model_.flush()
        return self

    def grow_features(self, n_features):
        """Widen to ``n_features`` inputs (a missing feature is a zero).  Returns self."""
        check_is_fitted(self)
        self.model_.grow_features(n_features)
        return self

    def add_class(self, label):
        """Add a class the model has not seen.  Returns self."""
        check_is_fitted(self)
        self.model_.add_class(label)
        return self

    @property
    def n_learned_(self):
        """Received examples that were learned (rehearsal and run-guard replays not counted)."""
        check_is_fitted(self)
        return int(self.model_.n_seen_) - int(self.model_.n_pending_) - int(self.model_.n_discarded_)

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
        return self.model_.predict_proba(X)

    def statistics(self):
        """The engine's counters (dict)."""
        check_is_fitted(self)
        return self.model_.statistics()

    def published_copy(self):
        """A copy for predictions that shares what the learner never rewrites
        (:func:`..budgeted._publish.published_copy`)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.model_ = self.model_.published_copy()
        return copy

    # ------------------------------------------------------------------ persistence
    STATE_VERSION = 1

    def get_state(self):
        """``(arrays, meta)``: the engine's state under ``model``, this pipeline's parameters
        and the plain estimator's class and parameters."""
        check_is_fitted(self)
        arrays, model_meta = self.model_.get_state()
        plain = self._plain()
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"},
            "plain": {"class": type(plain).__name__, "params": plain.get_params()},
            "n_received": int(self.n_received_),
            "model": model_meta,
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state`, or from a state saved when the budgeted estimators
        carried the stages themselves (``state_version`` 0, see :func:`legacy_state`)."""
        model = estimator_from_state(arrays, meta["model"])
        plain_meta = meta.get("plain") or _plain_of(model)
        face = _FACES[plain_meta["class"]]
        plain = face(**{k: v for k, v in plain_meta["params"].items() if k in face().get_params()})
        params = meta["params"]
        if meta["state_version"] == 0:  # saved by an engine: its own settings, as they were
            params = {name: getattr(model, name) for name in StreamingBSCA.STAGE_PARAMS}
        est = cls(plain, **params)
        est.model_ = model
        est.scaling_reason_ = resolve_scaling(est.scaling, plain)[1]
        est.n_received_ = int(meta.get("n_received", model.n_seen_))
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
    :class:`StreamingClassifier` around its engine; any other meta unchanged."""
    engines = {"BudgetedSGDClassifier": "StreamingBSGD", "BudgetedSCAClassifier": "StreamingBSCA"}
    if meta.get("estimator") not in engines or int(meta.get("state_version", 0)) > 6:
        return meta
    params = meta.get("params", {})
    stages = {name: params[name] for name in StreamingBSCA.STAGE_PARAMS if name in params}
    return {
        "estimator": "StreamingClassifier",
        "state_version": 0,
        "params": stages,
        "model": {**meta, "estimator": engines[meta["estimator"]]},
    }


for _name in DELEGATED:
    setattr(StreamingClassifier, _name, _read_through(_name))
