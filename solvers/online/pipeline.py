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

Each stage is a module of its own (:mod:`.stages.scaler`, :mod:`.stages.order`,
:mod:`.stages.rehearsal`, :mod:`.stages.drift`, :mod:`.stages.calibration`) with its state
and its part of the saved state (``stages``).  This class passes each received batch through
the scaler and the order stage and gives the estimator's engine the rows they release, scaled
and ordered (``learn_rows``); it sets the engine's γ when the scaler resolves ``"scale"``,
passes its rehearsal stage to the engine's learning calls (``learn_rows(fed, rehearsal=…)``:
it plans extra steps on the released rows) and counts its steps, feeds the
drift and calibration stages the prequential margins the engine computes, and cuts each batch
into the drift stage's pieces.  The engine is the plain estimator's (same parameters, no
stages); the saved state keeps the parts apart (``params``, ``plain``, ``model``, ``stages``).
Every example received is counted: ``n_received_ = n_learned_ + n_pending_`` at every moment.

Source of the composition: River's ``compose.Pipeline`` and scikit-learn's ``Pipeline``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp
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
from ..budgeted import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    WarmingUp,
    resolve_sv_storage,
)
from ..budgeted._weights import checked_weights, unit_weights
from ..persistence import register_estimator
from .pipeline_counts import PipelineCounts
from .pipeline_input import valid_as_is
from .pipeline_state import _PLAIN, PipelineState, resolve_scaling
from .served import ServedPipeline
from .stages import CalibrationStage, DriftStage, OrderStage, RehearsalStage, ScalerStage
from .stages.weights import ClassWeightStage, check_class_weight
from .upgrades import legacy_state, scaler_and_order_out_of_the_engine, stages_out_of_the_engine

__all__ = [
    "StreamingClassifier",
    "legacy_state",
    "resolve_scaling",
    "scaler_and_order_out_of_the_engine",
    "stages_out_of_the_engine",
]

#: Fitted attributes read through to the engine (what the service and users read of a model).
DELEGATED = (
    "classes_",
    "n_features_in_",
    "n_support_vectors_",
    "t_",
    "n_merges_",
    "n_violations_",
    "n_maintenance_",
    "gamma_",
    "lambda_eff_",
    "C_eff_",
    "support_vectors_",
    "dual_coef_",
    "sv_storage_",
    "sv_nonzeros_",
    "estimators_",
    "weight_degradation_total_",
    "maintenance_seconds_",
    "merge_diagnostics_",
)


def _read_through(name):
    def read(self):
        model = self.__dict__.get("model_")
        if model is None:
            raise AttributeError(f"{type(self).__name__} has no {name} before it has learned")
        return getattr(model, name)

    read.__name__ = name
    read.__doc__ = f"The engine's ``{name}``."
    return property(read)


@register_estimator
class StreamingClassifier(ServedPipeline, PipelineCounts, PipelineState, ClassifierMixin, BaseEstimator):
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
    class_weight : None, "balanced" or dict, default=None
        Each example's weight times its class's: a mapping ``{label: weight}`` or
        ``"balanced"``, n / (K · n_c) from the running class frequencies
        (:mod:`.stages.weights`, ``docs/weights.md``).
    window_epochs : int >= 1, default=1
        Passes over the rows when a :meth:`flush` learns the whole stream at once (a stream
        that ended inside the warm-up window or the buffer, nothing learned before): each row's
        own step, then ``window_epochs − 1`` passes in fresh random orders, taken by the
        rehearsal stage when its memory holds every row (BSCA: dual coordinate-ascent epochs,
        the estimator's ``fit``); otherwise, and for 1, one pass (``docs/selection.md``).

    Attributes
    ----------
    model_ : the estimator's engine (it learns scaled, ordered rows); scaling_reason_ : str
    n_received_, n_learned_, n_pending_ : int — examples received, learned, held by the scaler's
        window and the order stage's buffer (``n_received_ = n_learned_ + n_pending_``)
    scaling_, gamma_, warming_up_, n_replayed_, n_discarded_, coef_, intercept_ : from the
        stages (``coef_``/``intercept_`` of a linear model: on the features as sent); plus the
        engine's attributes in :data:`DELEGATED`

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
        "estimator": [HasMethods(["partial_fit", "learn_rows"]), None],
        "scaling": [StrOptions(set(SCALINGS))],
        "warmup": [Interval(Integral, 0, None, closed="left")],
        "shuffle_buffer": [Interval(Integral, 0, None, closed="left")],
        "run_guard": ["boolean"],
        "rehearsal": [Interval(Integral, 0, None, closed="left")],
        "rehearsal_memory": [Interval(Integral, 0, None, closed="left")],
        "on_drift": [StrOptions(set(ON_DRIFT))],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "window_epochs": [Interval(Integral, 1, None, closed="left")],
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
        class_weight=None,
        window_epochs=1,
    ):
        self.estimator = estimator
        self.scaling = scaling
        self.warmup = warmup
        self.shuffle_buffer = shuffle_buffer
        self.run_guard = run_guard
        self.rehearsal = rehearsal
        self.rehearsal_memory = rehearsal_memory
        self.on_drift = on_drift
        self.class_weight = class_weight
        self.window_epochs = window_epochs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        return "model_" in self.__dict__ and hasattr(self.model_, "classes_")

    # ------------------------------------------------------------------ the engine
    def _plain(self):
        return self.estimator if self.estimator is not None else BudgetedSGDClassifier()

    def check_params(self):
        """Validate this pipeline's and the estimator's parameters; returns self.  Raises
        ValueError naming the parameter."""
        self._validate_params()
        for name in (
            "rehearsal",
            "rehearsal_memory",
            "window_epochs",
        ):  # bool is an Integral to the constraints
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)):
                raise ValueError(
                    f"{name} must be an integer >= {int(name == 'window_epochs')}, got {value!r}"
                )
        check_class_weight(self.class_weight)
        engine = self._new_engine().check_params()
        if hasattr(engine, "sv_storage"):  # names sv_storage for sparse SVs with an offset
            resolve_sv_storage(engine.sv_storage, None, resolve_scaling(self.scaling, self._plain())[0])
        return self

    def _new_engine(self):
        plain = self._plain()
        if type(plain).__name__ not in _PLAIN:
            raise ValueError(f"estimator must be one of {', '.join(_PLAIN)}, got {type(plain).__name__}")
        plain.check_params()
        return type(plain)(**plain.get_params())  # the plain estimator is the engine

    def set_rehearsal(self, rehearsal: int):
        """Set ``rehearsal`` (extra steps per learned example, an int >= 0) of a fitted or fresh
        pipeline: the parameter and its rehearsal stage (each binary model's, one-vs-rest), so
        that the next rows learned rehearse so (a selector's candidates after their early
        rehearsal).  Returns self."""
        self.rehearsal = int(rehearsal)
        stage = self.__dict__.get("_rehearsal")
        for s in [stage, *(stage.children if stage is not None else [])]:
            if s is not None:
                s.rehearsal = self.rehearsal
        return self

    def _start(self):
        self.check_params()
        self.model_ = self._new_engine()
        seed = RehearsalStage.seed_of(self.model_.random_state)
        self._rehearsal = RehearsalStage(
            self.rehearsal, self.rehearsal_memory, seed
        )  # passed to each learning call
        self.scaling_reason_ = resolve_scaling(self.scaling, self._plain())[1]
        self.n_received_ = 0
        self._drift = DriftStage(self.on_drift)
        self._calibration = None  # made when the classes are known
        self._scaler = self._order = None  # made with the first batch (its width and storage)

    def _begin(self, X, classes):
        """The first batch: fix the engine's SV storage, start its state and make the scaler
        and order stages for X's width and the classes."""
        model = self.model_
        scaling = resolve_scaling(self.scaling, self._plain())[0]
        model._resolve_sv_storage(X, scaling)
        linear, sparse_rows = model._linear(), model._sparse_svs()
        n_classes, d = np.unique(np.asarray(classes)).shape[0], X.shape[1]
        self._scaler = ScalerStage(
            scaling, None if linear else model.gamma, self.warmup, d, n_classes,
            keep_sparse=linear or sparse_rows, text_like=linear,
        )  # fmt: skip
        self._order = OrderStage(
            self.shuffle_buffer, self.run_guard, d, n_classes,
            sparse_rows=sparse_rows, decide_rows=linear, random_state=model.random_state,
        )  # fmt: skip
        self._class_weights = ClassWeightStage(self.class_weight, n_classes)
        if isinstance(model, BudgetedSCAClassifier) and n_classes > 2:
            model._start_ovr(d, classes, streaming=True, calibrate=False)  # the calibration stage calibrates
        else:
            model._init_state(d, classes, ready=self._scaler.ready, calibrate=False)

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
        """``(X, y, labels)`` validated as a whole before any piece is learned (a batch that
        raises, ValueError naming the problem, changes nothing); ``labels``: the engine's
        encoding of ``y``, None on the first call."""
        if first or not self._valid_as_is(X, y):
            X, y = validate_data(self.model_, X, y, accept_sparse="csr", dtype=np.float64, reset=first)
            X = X if sp.issparse(X) else np.ascontiguousarray(X)
        if first:
            known = np.unique(np.asarray(classes))
            index = np.minimum(np.searchsorted(known, y), known.shape[0] - 1)
            bad = np.flatnonzero(known[index] != y)
            if bad.size:
                label = y[bad[0]].item() if isinstance(y[bad[0]], np.generic) else y[bad[0]]
                raise ValueError(f"y[{int(bad[0])}]: unknown label {label!r}; classes are {known.tolist()}")
            return X, y, None
        labels = self.model_._encode_labels(y)  # raises on an unknown label
        if classes is not None and not np.array_equal(np.unique(classes), self.model_.classes_):
            raise ValueError(
                f"classes {list(classes)} differ from the first call's {self.model_.classes_.tolist()}"
            )
        return X, y, labels

    def _valid_as_is(self, X, y) -> bool:
        return valid_as_is(self.model_, X, y)

    def _scaler_closed(self):
        """The window has closed: the engine takes the γ the scaler resolved."""
        if self._scaler.gamma is not None and self.model_.gamma_ is None:
            self.model_.use_gamma(self._scaler.gamma)

    def _learn_piece(self, X, labels, weights):
        """Scale, order and learn received rows (encoded labels, (n,) float64 importance
        weights; None: ones).  Rows of weight 0 take no step and enter no stage: they are
        counted (``n_weightless_``) and learned as nothing (``docs/weights.md``)."""
        if weights is None:
            weights = unit_weights(labels.shape[0])
        elif not weights.all():
            keep = weights > 0
            self.n_weightless_ = self.n_weightless_ + int(keep.shape[0] - keep.sum())
            X, labels, weights = X[keep], labels[keep], weights[keep]
            if X.shape[0] == 0:
                self.model_.learn_rows(None, rehearsal=self._rehearsal)
                return
        # a window that no γ is computed from is scaled straight into the order it enters in
        shuffle = None if self._scaler.window_gamma else self._order.window_order
        released = self._scaler.feed(X, labels, weights, shuffle)
        if released is None:  # the window stays open
            self.model_.learn_rows(None, rehearsal=self._rehearsal)
            return
        self._scaler_closed()
        shuffled = released[0] is not None and self._scaler.window_shuffled
        self.model_.learn_rows(self._order.feed(*released, shuffled=shuffled), rehearsal=self._rehearsal)

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Receive a batch: it passes the stages and is learned, or stays pending (window,
        buffer).  ``classes`` is required on the first call.  Returns self.

        X : (n, d) array-like or CSR, float64; y : (n,) labels; sample_weight : (n,) finite
        numbers >= 0 or None (ones) — each example's importance weight, carried with its row
        through the window, the buffer and the rehearsal memory to its step
        (``docs/weights.md``).  Raises ValueError on invalid input (a bad weight naming
        ``sample_weight[i]``); the model is unchanged then."""
        first = not self.__sklearn_is_fitted__()
        if first:
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            self._start()
        X, y, labels = self._checked(X, y, classes, first)
        weights = checked_weights(sample_weight, X.shape[0])
        if first:
            self._begin(X, classes)
        model = self.model_
        labels = model._encode_labels(y) if labels is None else labels
        weights = self._class_weights.weigh(model._class_index(labels), weights, model.classes_)
        self.__dict__.pop("_last", None)
        base, n = self.n_received_, int(y.shape[0])
        pieces = [(0, n)] if self.on_drift == "none" else self._drift.pieces(base, n)
        margins, learned = [], []
        for lo, hi in pieces:  # no reset to place (on_drift="none"): the batch whole
            self._learn_piece(X[lo:hi], labels[lo:hi], None if weights is None else weights[lo:hi])
            self._observe()
            margins.append(model.last_margins_)
            learned.append(model.last_y_)
            if self.on_drift != "none" and self._drift.reset_due(base + hi):
                model.restart_schedule()
                self._rehearsal.clear()  # its rows hold the old concept
        if len(margins) > 1:
            self._last = (np.concatenate(margins), np.concatenate(learned))
        self._count_weights(n, weights)
        self.n_received_ += n
        return self

    def fit(self, X, y):
        """From scratch: ``partial_fit(X, y, classes=np.unique(y))`` then :meth:`flush` — the
        same model as the service learns from the same rows in the same order.  Returns self."""
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self._start()
        return self.partial_fit(X, y, classes=np.unique(y)).flush()

    def flush(self):
        """Learn everything pending now (the end of a stream): an open window closes with what
        it holds, then the buffer empties in a random order.  Returns self."""
        check_is_fitted(self)
        self.__dict__.pop("_last", None)
        whole = self.n_pending_ == self.n_received_ > 0  # nothing learned before: the whole stream
        window = None if self._scaler.ready else self._scaler.close()  # open: nothing learned
        if window is not None:
            self._scaler_closed()
        fed = self._order.drain(window)
        with self._rehearsal.sweeping(int(self.window_epochs) - 1 if whole or window is not None else 0):
            self.model_.learn_rows(fed, rehearsal=self._rehearsal)
        self._observe()
        return self

    def grow_features(self, n_features):
        """Widen to ``n_features`` inputs (a missing feature is a zero, scaled with offset 0 and
        factor 1).  If the buffer's byte bound now holds fewer rows, the rows beyond it are
        learned now, drawn at random.  Returns self; ValueError below ``n_features_in_``."""
        check_is_fitted(self)
        d_old = self.model_.n_features_in_
        self.model_.grow_features(n_features, rehearsal=self._rehearsal)
        if int(n_features) > d_old:
            self._scaler.grow(n_features)
            self.model_.learn_rows(self._order.grow(n_features), rehearsal=self._rehearsal)
            self.__dict__.pop("_last", None)
            self._observe()  # buffered rows beyond the buffer's new bound were learned
        return self

    def add_class(self, label):
        """Add a class the model has not seen (it must sort after ``classes_``).  Returns self."""
        check_is_fitted(self)
        self.model_.add_class(label, rehearsal=self._rehearsal)
        self._scaler.add_class()
        self._order.add_class()
        self._class_weights.add_class()
        self.__dict__.pop("_last", None)
        self._calibration.add_class()
        return self

    # ------------------------------------------------------------------ prediction
    def _scaled(self, X):
        """X validated and scaled for the engine; raises ``WarmingUp`` while the window is open."""
        X = self.model_._validate_X(X, reset=False)
        scaler = self._scaler
        if not scaler.ready:
            raise WarmingUp(
                f"{type(self.model_).__name__} is warming up: {scaler.window_n} of {scaler.warmup} examples "
                "received; predictions start when the warm-up window closes"
            )
        return scaler.transform(X)

    def decision_function(self, X):
        """(n,) float64 for binary models, (n, n_classes) otherwise."""
        check_is_fitted(self)
        return self.model_.decision_function(self._scaled(X))

    def predict(self, X):
        """(n,) labels from ``classes_``."""
        check_is_fitted(self)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.model_.classes_[(scores > 0).astype(np.intp)]
        return self.model_.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X):
        """(n, n_classes) float64 calibrated probabilities (argmax = :meth:`predict`)."""
        check_is_fitted(self)
        return self._calibration.predict_proba(self.decision_function(X))

    def statistics(self):
        """The engine's counters (dict) with the rehearsal stage's steps
        (:meth:`~.stages.RehearsalStage.account`); ``examples_seen`` counts received examples."""
        check_is_fitted(self)
        out = self._rehearsal.account(self.model_.statistics())
        out["examples_seen"] = self.n_seen_
        out["weights"] = self.weight_figures()
        return out


for _name in DELEGATED:
    setattr(StreamingClassifier, _name, _read_through(_name))
