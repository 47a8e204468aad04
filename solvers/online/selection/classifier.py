"""The selector: :class:`SelectionClassifier`, a scikit-learn estimator composed of the
candidates (:mod:`.candidates`), successive halving (:mod:`.halving`), the leader rule
(:mod:`.leader`), the contract (:mod:`.served`) and its state (:mod:`.state`); here its
parameters, learning, predictions and statistics."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_X_y

from ..._params import DEFAULT_SHUFFLE_BUFFER, DEFAULT_WARMUP
from ...budgeted import BudgetedSGDClassifier
from ...budgeted._weights import checked_weights
from ...persistence import register_estimator
from .candidates import Candidates
from .halving import Halving
from .leader import LEADER_RULES, LeaderRule
from .served import ServedSelection
from .state import SelectionState
from .wide import piece_rows


@register_estimator
class SelectionClassifier(
    Candidates, Halving, LeaderRule, ServedSelection, SelectionState, ClassifierMixin, BaseEstimator
):
    """Successive halving over candidate streaming pipelines: the model of a stream with no settings.

    Parameters
    ----------
    estimator : BudgetedSGDClassifier or None
        The plain estimator every candidate starts from (its ``budget``, ``random_state``, ...);
        None: ``BudgetedSGDClassifier(random_state=0)``.  Its ``gamma`` is replaced by each
        candidate's; it is cloned, never fitted itself.
    candidates : sequence of dict or None, default=None
        Each a dict of ``gamma_factor`` (float > 0, times the plain "scale" γ), ``C`` (float > 0,
        default: the estimator's), ``rehearsal`` (int >= 0, default: this selector's) and
        ``short`` (bool, default false: a short-stream candidate, which races until the first
        rung and retires there); None: :data:`DEFAULT_CANDIDATES`.  Ties are won by the earlier
        candidate.
    warmup : int >= 1, default=1000
        Examples held before the scaling and γ are fixed and the candidates start.
    shuffle_buffer : int >= 0, default=20000
        Every candidate's shuffle buffer.
    rehearsal : int >= 0, default=1
        Every candidate's rehearsal once it has learned ``early_until`` examples, unless the
        candidate sets its own.
    early_rehearsal : int >= 0, default=4
        Every candidate's rehearsal until it has learned ``early_until`` examples (a short stream
        is where one pass is short), unless the candidate sets its own.
    early_until : int >= 0, default=4000
        Learned examples after which a candidate rehearses ``rehearsal`` (checked at multiples of
        :data:`CHECK_EVERY` examples received; 4,000 is the last rung of the default race).
    first_rung : int >= 1, default=2000
        Examples every candidate has learned at the first rung.
    pipeline_params : dict or None, default=None
        Further parameters of every candidate's :class:`StreamingClassifier` (``scaling``,
        ``run_guard``, ``rehearsal_memory``, ``on_drift``, ...; not ``warmup``,
        ``shuffle_buffer`` or ``rehearsal``, which are this selector's).
    eta : float > 1, default=2.0
        At each rung ``ceil(s / eta)`` of the ``s`` survivors are kept; rung k is held when every
        survivor has learned ``first_rung · eta^(k-1)`` examples.
    max_bytes : int >= 0 or None, default=None
        Bytes the race may take: when the window closes (the dimension d known) only the first
        :func:`race_size` candidates start (at least one), each counted by
        :meth:`candidate_bytes`, with the window; None: every candidate races.
    leader : {"recent", "evidence"}, default="recent"
        Which survivor predicts while more than one races (a short stream ends so).  Both read the
        prequential 0/1 hits of the second half of the examples learned (every candidate learns the
        same examples in the same order, so the hits are paired).  ``"evidence"``: the first
        survivor in candidate order (the default candidate, 1 × "scale", while it races) leads
        unless another is better by a one-sided exact McNemar test (:func:`mcnemar_p`) at level
        ``LEADER_ALPHA / m``, Bonferroni over the ``m`` other survivors; among those that pass,
        the best accuracy.  ``"recent"``: the best accuracy, no test (a tie goes to the better
        accuracy over all it learned, then to the earlier candidate).  The rule changes only which
        candidate answers, never what any candidate learns (the measurements that chose the
        default: ``docs/selection.md``).

    Attributes
    ----------
    candidates_ : list of StreamingClassifier or None — the racing pipelines (None: dropped);
        empty while the warm-up window is open
    settings_ : list of dict — each candidate's resolved settings (``gamma`` is numeric)
    leader_ : int — the candidate that predicts (``leader``; the sole survivor after the last rung)
    rungs_ : list of dict — each rung's position, scores and the candidates kept
    n_received_, n_learned_, n_pending_ : int — ``n_received_ = n_learned_ + n_pending_``
    classes_ : ndarray — the labels (from the first call's ``classes``)

    Raises
    ------
    ValueError
        On an invalid parameter or candidate (naming it), non-finite input or an unknown label.

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> from svmstream.solvers import BudgetedSGDClassifier
    >>> from svmstream.solvers.online.selection import SelectionClassifier
    >>> X, y = make_moons(n_samples=1400, noise=0.2, random_state=0)
    >>> plain = BudgetedSGDClassifier(budget=50, random_state=0)
    >>> sel = SelectionClassifier(plain, warmup=100, shuffle_buffer=100, first_rung=200)
    >>> for start in range(0, 1200, 100):
    ...     sel = sel.partial_fit(X[start : start + 100], y[start : start + 100], classes=[0, 1])
    >>> sel.n_received_ == sel.n_learned_ + sel.n_pending_, sel.n_survivors_, len(sel.rungs_)
    (True, 1, 2)
    >>> round(sel.flush().score(X[1200:], y[1200:]), 2) > 0.9
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["partial_fit", "engine_params"]), None],
        "candidates": [list, tuple, None],
        "warmup": [Interval(Integral, 1, None, closed="left")],
        "shuffle_buffer": [Interval(Integral, 0, None, closed="left")],
        "rehearsal": [Interval(Integral, 0, None, closed="left")],
        "early_rehearsal": [Interval(Integral, 0, None, closed="left")],
        "early_until": [Interval(Integral, 0, None, closed="left")],
        "first_rung": [Interval(Integral, 1, None, closed="left")],
        "eta": [Interval(Real, 1, None, closed="neither")],
        "pipeline_params": [dict, None],
        "max_bytes": [Interval(Integral, 0, None, closed="left"), None],
        "leader": [StrOptions(set(LEADER_RULES))],
    }

    def __init__(
        self,
        estimator=None,
        *,
        candidates=None,
        warmup=DEFAULT_WARMUP,
        shuffle_buffer=DEFAULT_SHUFFLE_BUFFER,
        rehearsal=1,
        early_rehearsal=4,
        early_until=4000,
        first_rung=2000,
        eta=2.0,
        pipeline_params=None,
        max_bytes=None,
        leader="recent",
    ):
        self.estimator = estimator
        self.candidates = candidates
        self.warmup = warmup
        self.shuffle_buffer = shuffle_buffer
        self.rehearsal = rehearsal
        self.early_rehearsal = early_rehearsal
        self.early_until = early_until
        self.first_rung = first_rung
        self.eta = eta
        self.pipeline_params = pipeline_params
        self.max_bytes = max_bytes
        self.leader = leader

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_is_fitted__(self):
        return "classes_" in self.__dict__

    # ------------------------------------------------------------------ parameters

    def _plain(self):
        return self.estimator if self.estimator is not None else BudgetedSGDClassifier(random_state=0)

    def check_params(self):
        """Validate the parameters, the candidates and the plain estimator; returns self."""
        self._validate_params()
        self._candidate_list()
        plain = self._plain()
        if not isinstance(plain, BudgetedSGDClassifier):
            raise ValueError(f"estimator must be a BudgetedSGDClassifier, got {type(plain).__name__}")
        plain.check_params()
        fixed = sorted(
            {"warmup", "shuffle_buffer", "rehearsal", "estimator"} & set(self.pipeline_params or {})
        )
        if fixed:
            raise ValueError(f"pipeline_params: {fixed[0]} is the selector's own parameter")
        return self

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Receive a batch: held (warm-up window), or passed to every surviving candidate, cut at
        the rungs.  ``classes`` is required on the first call.  Returns self.

        X : (n, d) array-like or CSR, float64; y : (n,) labels; sample_weight : (n,) numbers
        >= 0 or None — every candidate learns the same weighted stream (``docs/weights.md``;
        the race's scores count examples of weight > 0, unweighted).  Raises ValueError on
        invalid input; the model is unchanged then (input is checked before anything is held
        or passed).
        """
        if not self.__sklearn_is_fitted__():
            self.check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            self._begin(classes)
        elif self._settled() and np.shape(X)[1:] == (self.n_features_in_,):
            # the race is over: the survivor alone, which validates and counts (steady state)
            survivor = self.candidates_[self._alive()[0]]
            if piece_rows(self) is None:
                survivor.partial_fit(X, y, classes=classes, sample_weight=sample_weight)
            else:  # a wide race's smaller window: pieces of its rows (wide.py)
                for lo, hi in self._cut(0, int(np.shape(y)[0])):
                    w = None if sample_weight is None else np.asarray(sample_weight)[lo:hi]
                    survivor.partial_fit(X[lo:hi], np.asarray(y)[lo:hi], classes=classes, sample_weight=w)
            self.n_received_ += int(np.shape(y)[0])
            self._past += int(np.shape(y)[0])
            return self
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        if "n_features_in_" not in self.__dict__:
            self.n_features_in_ = int(X.shape[1])
            self._fix_window(X)
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            bad = int(np.flatnonzero(unknown)[0])
            raise ValueError(f"y[{bad}]: unknown label {y[bad]!r}; classes are {self.classes_.tolist()}")
        w = checked_weights(sample_weight, X.shape[0])
        if self._held or not self.candidates_:
            need = self._window_rows() - self._n_held()
            if need > 0:
                self._held.append((X[:need], y[:need], None if w is None else w[:need]))
                self.n_received_ += min(need, X.shape[0])
                X, y, w = X[need:], y[need:], None if w is None else w[need:]
            if self._n_held() >= self._window_rows():
                self._start_candidates()
        for lo, hi in self.race_.pieces(X.shape[0]):  # cut at the grid points
            for a, b in self._cut(lo, hi):
                if self._pass(X[a:b], y[a:b], None if w is None else w[a:b]):
                    self._checkpoint()
        return self

    def _cut(self, lo, hi):
        """``[lo, hi)`` in pieces of at most the window's rows when a wide race's window is
        smaller than ``warmup`` (:func:`~.wide.piece_rows`), else whole."""
        step = piece_rows(self)
        if step is None:
            return [(lo, hi)]
        return [(a, min(a + step, hi)) for a in range(lo, hi, step)]

    def _begin(self, classes):
        self.__dict__.pop("n_features_in_", None)
        self.__dict__.pop("window_rows_", None)
        self.__dict__.pop("race_size_", None)
        self.classes_ = np.unique(np.asarray(classes))
        self._held = []
        self.settings_ = []
        self._new_race([])
        self.n_received_ = 0
        self._race_end_detections = 0

    def _pass(self, X, y, w=None):
        """Every racing candidate learns the rows; returns whether the race is at a grid point."""
        alive = self._alive()
        for i in alive:
            est = self.candidates_[i]
            est.partial_fit(X, y, classes=self.classes_, sample_weight=w)
            if len(alive) > 1:  # the scores are frozen once the race is over
                self._record(i)
        self.n_received_ += X.shape[0]
        return self.race_.advance(X.shape[0])

    def fit(self, X, y):
        """From scratch: ``partial_fit(X, y, classes=np.unique(y))`` then :meth:`flush`.  Returns self."""
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        check_classification_targets(y)
        self.__dict__.pop("classes_", None)
        return self.partial_fit(X, y, classes=np.unique(y)).flush()

    def flush(self):
        """Learn everything pending now in every surviving candidate (the end of a stream): an
        open window starts the candidates with what it holds.  Returns self."""
        check_is_fitted(self)
        if self._held:
            self._start_candidates(at_flush=True)
        alive = self._alive()
        for i in alive:
            self.candidates_[i].flush()
            if len(alive) > 1:
                self._record(i)
        return self

    def grow_features(self, n_features):
        """Widen to ``n_features`` inputs (a missing feature is a zero): the held rows and every
        surviving candidate.  Returns self; ValueError below ``n_features_in_``."""
        check_is_fitted(self)
        n_features = int(n_features)
        if n_features < self.n_features_in_:
            raise ValueError(f"n_features must be >= the model's {self.n_features_in_}, got {n_features!r}")
        extra = n_features - self.n_features_in_
        if extra:
            self._held = [
                (
                    sp.hstack([X, sp.csr_matrix((X.shape[0], extra))], format="csr")
                    if sp.issparse(X)
                    else np.hstack([X, np.zeros((X.shape[0], extra))]),
                    y,
                    w,
                )
                for X, y, w in self._held
            ]
            for i in self._alive():
                self.candidates_[i].grow_features(n_features)
            self.n_features_in_ = n_features
        return self

    def add_class(self, label):
        """Add a class no candidate has seen (every surviving candidate).  Returns self."""
        check_is_fitted(self)
        if label not in self.classes_:
            for i in self._alive():
                self.candidates_[i].add_class(label)
            self.classes_ = np.unique(np.append(self.classes_, label))
        return self

    @property
    def n_learned_(self):
        """Received examples the leader has learned (0 while the window is open)."""
        check_is_fitted(self)
        return int(self._leader().n_learned_) if self._alive() else 0

    @property
    def n_pending_(self):
        """Received examples not learned yet: held in the window, or pending in the leader."""
        check_is_fitted(self)
        return int(self._leader().n_pending_) if self._alive() else self._n_held()

    @property
    def warming_up_(self):
        """True while the selector's or the leader's warm-up window is open."""
        check_is_fitted(self)
        return not self._alive() or bool(self._leader().warming_up_)

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X):
        """The leader's: (n,) float64 for binary models, (n, n_classes) otherwise."""
        return self._leader().decision_function(X)

    def predict(self, X):
        """The leader's labels, (n,) from ``classes_``."""
        return self._leader().predict(X)

    def predict_proba(self, X):
        """The leader's calibrated probabilities, (n, n_classes) float64."""
        return self._leader().predict_proba(X)

    def statistics(self):
        """The leader's counters plus the race under ``selection`` (:meth:`race`)."""
        stats = dict(self._leader().statistics()) if self._alive() else {}
        stats["selection"] = self.race()
        return stats
