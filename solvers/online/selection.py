"""Online model selection for a model created with no settings: successive halving on the stream.

:class:`SelectionClassifier` races a few candidate :class:`~.pipeline.StreamingClassifier` pipelines
on the same stream and drops the losers at fixed points ("rungs"), as River's
``model_selection.SuccessiveHalvingClassifier`` does (Jamieson & Talwalkar, *Non-stochastic best arm
identification and hyperparameter optimization*, AISTATS 2016): at rung k the ``s`` survivors are
ranked by their prequential accuracy and ``ceil(s / eta)`` are kept.  Unlike River's budget of
model updates (a stream has no known length), rung k is held once every survivor has learned
``first_rung · eta^(k-1)`` examples, and it ranks the candidates on the examples they learned in the
second half of the stretch before it (their errors on the most recent rows, not the start-up that
every candidate shares).  Once one candidate is left the selector is that pipeline plus a
counter: the steady-state CPU per example is one model's.

A candidate is a setting relative to what the stages would choose: ``gamma_factor`` times the
plain ``gamma="scale"`` (1 / (d · Var) of the scaled warm-up window, scikit-learn's rule, for any
number of classes), ``C`` and ``rehearsal``.  The selector holds the first ``warmup`` examples
itself, reads the scaling and the plain "scale" γ from them with a probe pipeline (public API:
``scaling_``, ``gamma_``), then starts every candidate with the numeric γ and the resolved scaling
and passes it the held rows: each candidate learns every example the stream gave, in the same
order.  Candidates share ``random_state``: their shuffle buffers draw the same rows.

Every received example is counted: ``n_received_ = n_learned_ + n_pending_``, where the learned and
pending examples are the current leader's (every surviving candidate has received all examples).
Rungs are decided only at multiples of :data:`CHECK_EVERY` examples received (a batch that crosses
one is split), so the selection does not depend on how the stream is cut into batches.  The choice of candidates
and schedule, and the measurements behind it, are in ``docs/selection.md``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.stats import binom
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_X_y

from .._params import DEFAULT_REHEARSAL_MEMORY, DEFAULT_SHUFFLE_BUFFER, DEFAULT_WARMUP
from ..budgeted import BudgetedSGDClassifier, WarmingUp, model_bytes, window_bytes
from ..budgeted._base import resolve_lambda
from ..contract import DriftReport, ExampleAccount, Learned, ModelReport
from ..persistence import estimator_from_state, register_estimator
from .pipeline import StreamingClassifier

#: The candidates raced when none are given (chosen by ``benchmarks/bench_selection.py``).
DEFAULT_CANDIDATES = (
    {"gamma_factor": 1.0},
    {"gamma_factor": 0.25},
    {"gamma_factor": 4.0},
    {"gamma_factor": 4.0, "C": 0.1, "short": True},
)
#: What a candidate may set.
CANDIDATE_KEYS = {"gamma_factor": Real, "C": Real, "rehearsal": Integral, "short": bool}
#: The leader rules (:attr:`SelectionClassifier.leader_`).
LEADER_RULES = ("recent", "evidence")
#: The evidence rule's family-wise level: a survivor replaces the first one only at p <= this / m.
LEADER_ALPHA = 0.05
#: Rungs are decided every this many examples received past the window (at exact counts, so the
#: race does not depend on how the stream is cut into batches).
CHECK_EVERY = 256


def race_size(n_candidates, candidate_bytes, window, max_bytes):
    """How many candidates race within ``max_bytes``: the first ``k`` (at least one) such that
    the warm-up window (``window`` bytes) and ``k`` candidates of ``candidate_bytes`` each fit
    (:func:`~svmstream.solvers.model_bytes`, :func:`~svmstream.solvers.window_bytes`);
    ``max_bytes`` None: all ``n_candidates``.  Returns an int in ``[1, n_candidates]``."""
    if max_bytes is None:
        return int(n_candidates)
    room = (int(max_bytes) - int(window)) // max(1, int(candidate_bytes))
    return int(max(1, min(int(n_candidates), room)))


def _detections(pipeline):
    """Drift detections of a candidate pipeline (0 before it has learned)."""
    try:
        return int(pipeline.drift_.n_detections)
    except AttributeError:
        return 0


def _probe_gamma(batches, warmup, scaling):
    """``(scaling, gamma)`` the stages choose from the held rows: a :class:`StreamingClassifier`
    with ``gamma="scale"`` learns them with two alternating stand-in labels (two classes: the
    plain "scale" rule, with no multi-class factor) and a budget of 2 (cheap)."""
    probe = StreamingClassifier(
        BudgetedSGDClassifier(budget=2, random_state=0),
        scaling=scaling,
        warmup=warmup,
        shuffle_buffer=0,
        run_guard=False,
        rehearsal=0,
        on_drift="none",
    )
    seen = 0
    for X, _ in batches:
        stand_in = (np.arange(seen, seen + X.shape[0]) % 2).astype(np.int64)
        probe.partial_fit(X, stand_in, classes=[0, 1])
        seen += X.shape[0]
    if probe.warming_up_:
        probe.flush()
    return probe.scaling_, float(probe.gamma_)


def mcnemar_p(better: int, worse: int) -> float:
    """One-sided exact McNemar test (McNemar, *Psychometrika* 12, 1947; the exact conditional
    form, e.g. Fagerland, Lydersen & Laake, *BMC Med. Res. Methodol.* 13:91, 2013; recommended for
    comparing two classifiers on the same examples by Dietterich, *Neural Computation* 10(7),
    1998).  Of the ``better + worse`` discordant pairs — examples one classifier got right and the
    other wrong — ``better`` favour the challenger; under the null hypothesis (equal accuracy)
    ``better ~ Binomial(better + worse, 1/2)``.  Returns ``P(X >= better)``, a float in [0, 1]
    (1.0 with no discordant pair).  The prequential hits of a learning model are not independent
    examples: the level is nominal."""
    n = int(better) + int(worse)
    if n == 0:
        return 1.0
    return float(binom.sf(int(better) - 1, n, 0.5))


@register_estimator
class SelectionClassifier(ClassifierMixin, BaseEstimator):
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

    def _candidate_list(self):
        """The candidates as dicts, checked (ValueError naming the candidate and key)."""
        raw = DEFAULT_CANDIDATES if self.candidates is None else self.candidates
        if len(raw) == 0:
            raise ValueError("candidates: give at least one candidate (or None for the defaults)")
        out = []
        for i, cand in enumerate(raw):
            if not isinstance(cand, dict):
                raise ValueError(f"candidates[{i}] must be a dict, got {type(cand).__name__}")
            unknown = sorted(set(cand) - set(CANDIDATE_KEYS))
            if unknown:
                raise ValueError(f"candidates[{i}]: unknown key(s) {unknown}; use {sorted(CANDIDATE_KEYS)}")
            for key, kind in CANDIDATE_KEYS.items():
                value = cand.get(key)
                if kind is bool:
                    if value is not None and not isinstance(value, bool):
                        raise ValueError(f"candidates[{i}].{key} must be true or false, got {value!r}")
                    continue
                ok = value is None or (isinstance(value, kind) and not isinstance(value, bool))
                if not ok or (value is not None and (value < 0 or (key != "rehearsal" and value == 0))):
                    raise ValueError(f"candidates[{i}].{key} must be a positive number, got {value!r}")
            out.append(dict(cand))
        return out

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

    # ------------------------------------------------------------------ candidates
    def _settings(self, scaling, gamma):
        plain = self._plain()
        settings = []
        for cand in self._candidate_list():
            settings.append(
                {
                    "gamma": float(cand.get("gamma_factor", 1.0)) * gamma,
                    "gamma_factor": float(cand.get("gamma_factor", 1.0)),
                    "C": float(cand.get("C", plain.C)),
                    "rehearsal": int(cand.get("rehearsal", self.rehearsal)),
                    "early_rehearsal": int(cand.get("rehearsal", self.early_rehearsal)),
                    "short": bool(cand.get("short", False)),
                    "early": True,
                    "scaling": scaling,
                }
            )
        return settings

    def _pipeline(self, setting):
        plain = self._plain()
        params = {**plain.get_params(), "gamma": setting["gamma"], "C": setting["C"]}
        return StreamingClassifier(
            type(plain)(**params),
            **{**(self.pipeline_params or {}), "scaling": setting["scaling"]},
            warmup=self.warmup,
            shuffle_buffer=self.shuffle_buffer,
            rehearsal=setting["early_rehearsal"] if setting["early"] else setting["rehearsal"],
        )

    def candidate_bytes(self, n_features):
        """Estimated bytes of one candidate of dimension ``n_features`` with two classes
        (:func:`~svmstream.solvers.model_bytes`: SVs, shuffle buffer, run guard, rehearsal
        memory), the figure :func:`race_size` divides ``max_bytes`` by."""
        plain, pp = self._plain(), self.pipeline_params or {}
        return model_bytes(
            plain.budget, n_features, self.shuffle_buffer, pp.get("run_guard", True), 2,
            plain.maintenance, "rbf", plain.sv_storage, self._pipeline_rehearsal_memory(),
        )  # fmt: skip

    def _pipeline_rehearsal_memory(self):
        """Rows each candidate remembers for rehearsal (0 when none rehearses)."""
        if not (self.rehearsal or self.early_rehearsal):
            return 0
        return (self.pipeline_params or {}).get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY)

    def _race_size(self, n_candidates):
        d = self.n_features_in_
        return race_size(n_candidates, self.candidate_bytes(d), window_bytes(self.warmup, d), self.max_bytes)

    def _start_candidates(self):
        """Close the selector's window: resolve scaling and γ, start every candidate and pass it
        the held rows."""
        scaling, gamma = _probe_gamma(
            self._held, self.warmup, (self.pipeline_params or {}).get("scaling", "auto")
        )
        self.gamma_scale_ = gamma
        self.settings_ = self._settings(scaling, gamma)
        self.race_size_ = self._race_size(len(self.settings_))
        self.candidates_ = [
            self._pipeline(s) if i < self.race_size_ else None for i, s in enumerate(self.settings_)
        ]
        held, self._held = self._held, []
        k = len(self.candidates_)
        self._score = np.zeros((k, 4), dtype=np.int64)  # segment correct, total; all correct, total
        self._hits = [np.zeros(0, dtype=np.int8) for _ in range(k)]  # 1: right, in learning order
        for X, y in held:
            for i in self._alive():
                self.candidates_[i].partial_fit(X, y, classes=self.classes_)
                self._record(i)

    def _record(self, i):
        """Score the examples candidate ``i`` learned in its last call (prequential: f before the
        step)."""
        est = self.candidates_[i]
        margins, y = est.last_margins_, est.last_y_
        if y.shape[0] == 0:
            return
        if margins.ndim == 1:
            pred = np.where(margins > 0, est.classes_[1], est.classes_[0])
        else:
            pred = est.classes_[np.argmax(margins, axis=1)]
        hits = pred == y
        correct = int(np.count_nonzero(hits))
        self._score[i] += (correct, y.shape[0], correct, y.shape[0])
        self._hits[i] = np.concatenate([self._hits[i], hits.astype(np.int8)])

    def _settled(self):
        """One candidate left, past its early rehearsal: the steady state."""
        alive = self._alive()
        return len(alive) == 1 and not self.settings_[alive[0]].get("early", False)

    def _alive(self):
        return [i for i, est in enumerate(self.candidates_) if est is not None]

    def _marks(self):
        """``(learned examples at the next rung, at the start of its scoring segment)``, or None
        once one candidate is left."""
        if len(self._alive()) <= 1:
            return None
        at = self.first_rung * self.eta ** len(self.rungs_)
        before = self.first_rung * self.eta ** (len(self.rungs_) - 1) if self.rungs_ else 0
        return int(math.ceil(at)), int(math.ceil(max(before, at / 2)))

    def _checkpoint(self):
        """At a multiple of :data:`CHECK_EVERY` received examples: open the scoring segment, or
        hold the rung, when every survivor has learned that many examples."""
        self._settle()
        marks = self._marks()
        if marks is None:
            return
        learned = int(self._score[self._alive(), 3].min())
        if not self._segment_open and learned >= marks[1]:
            self._score[:, :2] = 0
            self._segment_open = True
        elif self._segment_open and learned >= marks[0]:
            self._rung()
            self._segment_open = False

    def _settle(self):
        """Each candidate that has learned ``early_until`` examples goes from ``early_rehearsal``
        to ``rehearsal`` (the pipeline's parameter and its rehearsal stages: saved as such)."""
        for i in self._alive():
            setting, est = self.settings_[i], self.candidates_[i]
            if setting["early"] and est.n_learned_ >= self.early_until:
                setting["early"] = False
                est.rehearsal = setting["rehearsal"]
                stage = est.model_._rehearsal
                for s in [stage, *stage.children]:
                    if s is not None:
                        s.rehearsal = setting["rehearsal"]

    def _rung(self):
        alive = self._alive()
        seg = self._score[alive]
        acc = np.where(seg[:, 1] > 0, seg[:, 0] / np.maximum(seg[:, 1], 1), 0.0)
        # a short-stream candidate retires at the first rung (unless only such candidates race)
        ranked = [j for j in range(len(alive)) if not self.settings_[alive[j]].get("short")] or list(
            range(len(alive))
        )
        order = sorted(ranked, key=lambda j: (-acc[j], alive[j]))
        keep = sorted(alive[j] for j in order[: int(math.ceil(len(alive) / self.eta))])
        for i in alive:
            if i not in keep:
                self.candidates_[i] = None
                self._hits[i] = np.zeros(0, dtype=np.int8)
        if len(keep) == 1:  # the race is over: the history is no longer read
            self._hits[keep[0]] = np.zeros(0, dtype=np.int8)
            self._race_end_detections = _detections(self.candidates_[keep[0]])
        self.rungs_.append(
            {
                "received": int(self.n_received_),
                "learned": int(seg[:, 3].min()),
                "accuracy": {str(alive[j]): float(acc[j]) for j in range(len(alive))},
                "scored": {str(alive[j]): int(seg[j, 1]) for j in range(len(alive))},
                "kept": keep,
            }
        )

    @property
    def leader_(self):
        """The candidate that predicts (index into ``candidates_``), by the ``leader`` rule."""
        check_is_fitted(self)
        alive = self._alive()
        if not alive:
            raise AttributeError("no candidate before the warm-up window closes")
        if len(alive) == 1:
            return alive[0]
        if self.leader == "recent":  # ties: the whole prequential record, then candidate order
            acc = [(self._recent_accuracy(i), self._score[i, 2] / max(self._score[i, 3], 1)) for i in alive]
            return alive[min(range(len(alive)), key=lambda j: (-acc[j][0], -acc[j][1], alive[j]))]
        return self.leader_test()["leader"]

    def _recent_accuracy(self, i):
        """Prequential accuracy of candidate ``i`` over the second half of what it has learned
        (the start-up, where wide kernels learn fastest, does not count)."""
        hits = self._hits[i]
        recent = hits[hits.shape[0] // 2 :]
        return float(recent.mean()) if recent.shape[0] else 0.0

    def _recent_hits(self, alive):
        """The survivors' 0/1 hits over the second half of the examples they all learned,
        (len(alive), m) int8, aligned column by column."""
        n = min(self._hits[i].shape[0] for i in alive)
        return np.stack([self._hits[i][n // 2 : n] for i in alive]) if alive else np.zeros((0, 0), np.int8)

    def leader_test(self):
        """The evidence rule's figures: ``incumbent`` (the first survivor), ``leader``, and per
        other survivor its ``accuracy``, the discordant pairs ``better`` (it right, the incumbent
        wrong) and ``worse``, the one-sided exact McNemar ``p`` and whether it ``passes``
        ``p <= LEADER_ALPHA / m`` (JSON-ready; keys of ``challengers`` are candidate indices)."""
        check_is_fitted(self)
        alive = self._alive()
        if not alive:
            return {"incumbent": None, "leader": None, "window": 0, "level": None, "challengers": {}}
        hits = self._recent_hits(alive)
        acc = hits.mean(axis=1) if hits.shape[1] else np.zeros(len(alive))
        level = LEADER_ALPHA / max(len(alive) - 1, 1)
        out, leader = {}, 0
        for j in range(1, len(alive)):
            better = int(np.count_nonzero((hits[j] == 1) & (hits[0] == 0)))
            worse = int(np.count_nonzero((hits[j] == 0) & (hits[0] == 1)))
            p = mcnemar_p(better, worse)
            passes = bool(p <= level)
            out[str(alive[j])] = {
                "accuracy": float(acc[j]),
                "better": better,
                "worse": worse,
                "p": p,
                "passes": passes,
            }
            if passes and (leader == 0 or acc[j] > acc[leader]):
                leader = j
        return {
            "incumbent": alive[0],
            "incumbent_accuracy": float(acc[0]),
            "leader": alive[leader],
            "window": int(hits.shape[1]),
            "level": level,
            "challengers": out,
        }

    @property
    def drift_detections_(self):
        """Drift detections of the sole survivor since the race ended; 0 while the window is
        open or candidates race (the race is then the alternative a detection would start)."""
        survivor = self.survivor_
        return 0 if survivor is None else max(0, _detections(survivor) - self._race_end_detections)

    @property
    def survivor_(self):
        """The sole surviving candidate pipeline once the race is over, else None."""
        check_is_fitted(self)
        alive = self._alive()
        return self.candidates_[alive[0]] if len(alive) == 1 else None

    @property
    def n_survivors_(self):
        """Candidates still racing (0 while the warm-up window is open)."""
        check_is_fitted(self)
        return len(self._alive())

    def _leader(self):
        check_is_fitted(self)
        if not self._alive():
            raise WarmingUp(
                f"{type(self).__name__} is warming up: {self._n_held()} of {self.warmup} examples received"
            )
        return self.candidates_[self.leader_]

    def _n_held(self):
        return sum(int(X.shape[0]) for X, _ in self._held)

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None):
        """Receive a batch: held (warm-up window), or passed to every surviving candidate, cut at
        the rungs.  ``classes`` is required on the first call.  Returns self.

        X : (n, d) array-like or CSR, float64; y : (n,) labels.  Raises ValueError on invalid
        input; the model is unchanged then (input is checked before anything is held or passed).
        """
        if not self.__sklearn_is_fitted__():
            self.check_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit")
            self._begin(classes)
        elif self._settled() and np.shape(X)[1:] == (self.n_features_in_,):
            # the race is over: the survivor alone, which validates and counts (steady state)
            survivor = self.candidates_[self._alive()[0]]
            survivor.partial_fit(X, y, classes=classes)
            self.n_received_ += int(np.shape(y)[0])
            self._past += int(np.shape(y)[0])
            return self
        X, y = check_X_y(X, y, accept_sparse="csr", dtype=np.float64)
        if "n_features_in_" not in self.__dict__:
            self.n_features_in_ = int(X.shape[1])
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input"
            )
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            bad = int(np.flatnonzero(unknown)[0])
            raise ValueError(f"y[{bad}]: unknown label {y[bad]!r}; classes are {self.classes_.tolist()}")
        if self._held or not self.candidates_:
            need = self.warmup - self._n_held()
            if need > 0:
                self._held.append((X[:need], y[:need]))
                self.n_received_ += min(need, X.shape[0])
                X, y = X[need:], y[need:]
            if self._n_held() >= self.warmup:
                self._start_candidates()
        while X.shape[0]:
            cut = min(X.shape[0], CHECK_EVERY - self._past % CHECK_EVERY)
            self._pass(X[:cut], y[:cut])
            X, y = X[cut:], y[cut:]
            if self._past % CHECK_EVERY == 0:
                self._checkpoint()
        return self

    def _begin(self, classes):
        self.__dict__.pop("n_features_in_", None)
        self.__dict__.pop("race_size_", None)
        self.classes_ = np.unique(np.asarray(classes))
        self._held = []
        self.candidates_ = []
        self.settings_ = []
        self.rungs_ = []
        self.n_received_ = 0
        self._past = 0
        self._segment_open = False
        self._race_end_detections = 0
        self._score = np.zeros((0, 4), dtype=np.int64)
        self._hits = []

    def _pass(self, X, y):
        alive = self._alive()
        for i in alive:
            est = self.candidates_[i]
            est.partial_fit(X, y, classes=self.classes_)
            if len(alive) > 1:  # the scores are frozen once the race is over
                self._record(i)
        self.n_received_ += X.shape[0]
        self._past += X.shape[0]

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
            self._start_candidates()
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
                )
                for X, y in self._held
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

    def race(self):
        """The race as JSON: ``candidates`` (each one's settings, whether it still races, examples
        learned, prequential accuracy over its last scored segment and over the second half of
        what it learned), ``rungs``, ``leader`` (None while the window is open), the ``leader_rule``
        and, while more than one races, the evidence rule's ``leader_test`` (:meth:`leader_test`)."""
        check_is_fitted(self)
        alive = self._alive()
        cands = []
        for i, setting in enumerate(self.settings_):
            est = self.candidates_[i]
            seg = self._score[i]
            cands.append(
                {
                    "settings": {k: v for k, v in setting.items() if k != "scaling"},
                    "racing": est is not None,
                    "learned": int(seg[3]),
                    "segment_accuracy": float(seg[0] / seg[1]) if seg[1] else None,
                    "recent_accuracy": self._recent_accuracy(i)
                    if est is not None and len(alive) > 1
                    else None,
                }
            )
        return {
            "candidates": cands,
            "rungs": [dict(r) for r in self.rungs_],
            "leader": self.leader_ if alive else None,
            "leader_rule": self.leader,
            "leader_test": self.leader_test() if len(alive) > 1 else None,
            "window": {"held": self._n_held(), "warmup": int(self.warmup)},
            "race_size": self.__dict__.get("race_size_"),
            "max_bytes": self.max_bytes,
        }

    # ------------------------------------------------------------------ the contract
    TASK = "classification"
    HAS_CLASSES = True
    LEARNS_ONLINE = True

    def fitted(self) -> bool:
        """Whether it has received its first batch."""
        return self.__sklearn_is_fitted__()

    def report(self) -> ModelReport:
        """The selector's figures (:class:`~..contract.ModelReport`): the leader's, with the
        selector's example account, the race under ``statistics["selection"]`` and the drift
        detections since the race ended as ``drift.actionable``; while the window is open the
        held rows as pending and seen, the plain estimator's λ, no step, SV or merge."""
        frozen = self.__dict__.get("_published_report")
        if frozen is not None:
            return frozen
        if not self.fitted():
            return ModelReport(task=self.TASK, has_classes=self.HAS_CLASSES)
        if not self._alive():
            plain, held = self._plain(), self._n_held()
            return ModelReport(
                task=self.TASK, has_classes=self.HAS_CLASSES, fitted=True, warming_up=True,
                examples=ExampleAccount(int(self.n_received_), 0, held),
                n_features=self.__dict__.get("n_features_in_"), n_classes=int(self.classes_.shape[0]),
                n_seen=held, lambda_=float(resolve_lambda(plain.lambda_, plain.C, plain.n_samples)),
                statistics={"selection": self.race()},
            )  # fmt: skip
        leader = self._leader().report()
        drift = leader.drift
        return replace(
            leader,
            examples=ExampleAccount(int(self.n_received_), leader.examples.learned, leader.examples.pending),
            statistics={**leader.statistics, "selection": self.race()},
            drift=DriftReport(drift.detections, drift.last_at, int(self.drift_detections_)),
        )

    def nonfinite(self, X=None) -> str | None:
        """The leader's :meth:`~.served.ServedPipeline.nonfinite` (None while the window is open)."""
        return self._leader().nonfinite(X) if self.fitted() and self._alive() else None

    def last_learned(self) -> Learned | None:
        """The leader's last learned margins and labels (None while the window is open)."""
        return self._leader().last_learned() if self.fitted() and self._alive() else None

    def input_width(self) -> int | None:
        """``n_features_in_`` (None before the first batch)."""
        width = self.__dict__.get("n_features_in_")
        return None if width is None else int(width)

    def class_count(self) -> int | None:
        """``len(classes_)`` (None before the first batch)."""
        return int(self.classes_.shape[0]) if self.fitted() else None

    def serves(self) -> bool:
        """Fitted and out of the selector's and the leader's warm-up windows."""
        return self.fitted() and not self.warming_up_

    def drift(self) -> DriftReport:
        """The leader's detections; ``actionable``: the sole survivor's since the race ended."""
        if not self.fitted() or not self._alive():
            return DriftReport()
        drift = self._leader().drift()
        return DriftReport(drift.detections, drift.last_at, int(self.drift_detections_))

    def warm_start(self):
        """The sole survivor's warm copy once the race is over (None before)."""
        survivor = self.survivor_ if self.fitted() else None
        return None if survivor is None else survivor.warm_start()

    def serving_settings(self):
        """The sole survivor's settings once the race is over (numeric ``gamma``, ``C``,
        ``rehearsal``, ...; a drift challenger copies them), else None."""
        if not self.fitted() or self.survivor_ is None:
            return None
        return self.settings_[self.leader_]

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """The window and as many candidates as race at width ``n_features``
        (:func:`race_size`, two classes and their rehearsal memory), each counted with
        ``n_classes`` classes and its rehearsal memory when ``rehearsal`` > 0."""
        plain, pp = self._plain(), self.pipeline_params or {}
        window = window_bytes(self.warmup, n_features)
        models = race_size(
            len(self._candidate_list()), self.candidate_bytes(n_features), window, self.max_bytes
        )
        memory = pp.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY) if self.rehearsal else 0
        one = model_bytes(
            plain.budget, n_features, self.shuffle_buffer, pp.get("run_guard", True), max(2, int(n_classes)),
            plain.maintenance, "rbf", plain.sv_storage, memory,
        )  # fmt: skip
        return window + models * one

    def published_copy(self):
        """What predictions read: a selector that holds only the leader's ``published_copy()``
        (while the window is open: no candidate, its predictions raise :class:`WarmingUp`), and
        reports what this selector reports now (:meth:`report`, frozen).  It is not saved:
        :meth:`get_state` of a published copy raises TypeError."""
        check_is_fitted(self)
        report = self.report()
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy._held = list(self._held)  # read for the count in the message only
        alive = self._alive()
        copy.candidates_ = [None] * len(self.candidates_)
        if alive:
            leader = self.leader_
            copy.candidates_[leader] = self.candidates_[leader].published_copy()
        copy._published_report = report
        return copy

    # ------------------------------------------------------------------ persistence
    STATE_VERSION = 1

    def get_state(self):
        """``(arrays, meta)``: each surviving candidate's state under ``c{i}.``, the held rows under
        ``held{j}.``, the scores and the rungs."""
        check_is_fitted(self)
        if "_published_report" in self.__dict__:
            raise TypeError("a published copy of a selector holds its leader only: save the selector itself")
        arrays = {"classes": self.classes_, "score": self._score.copy()}
        arrays.update({f"hits{i}": h for i, h in enumerate(self._hits)})
        held_meta = []
        for j, (X, y) in enumerate(self._held):
            arrays[f"held{j}.y"] = y
            if sp.issparse(X):
                X = X.tocsr()
                arrays.update(
                    {f"held{j}.data": X.data, f"held{j}.indices": X.indices, f"held{j}.indptr": X.indptr}
                )
                held_meta.append({"sparse": True, "shape": list(X.shape)})
            else:
                arrays[f"held{j}.X"] = X
                held_meta.append({"sparse": False})
        cands = []
        for i, est in enumerate(self.candidates_):
            if est is None:
                cands.append(None)
                continue
            sub, meta = est.get_state()
            arrays.update({f"c{i}.{k}": v for k, v in sub.items()})
            cands.append(meta)
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"}
        plain = self._plain()
        meta = {
            "estimator": type(self).__name__,
            "state_version": self.STATE_VERSION,
            "params": params,
            "plain": plain.get_params(),
            "n_received": int(self.n_received_),
            "n_features": self.__dict__.get("n_features_in_"),
            "past": int(self._past),
            "segment_open": bool(self._segment_open),
            "held": held_meta,
            "candidates": cands,
            "settings": self.settings_,
            "rungs": self.rungs_,
            "gamma_scale": getattr(self, "gamma_scale_", None),
            "race_size": self.__dict__.get("race_size_"),
            "race_end_detections": int(self._race_end_detections),
        }
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state`; the result continues exactly as the saved one would."""
        params = {"leader": "recent", **meta["params"]}  # states saved before the rule existed
        if params.get("candidates") is not None:
            params["candidates"] = [dict(c) for c in params["candidates"]]
        est = cls(BudgetedSGDClassifier(**meta["plain"]), **params)
        est._begin(arrays["classes"])
        if meta.get("n_features") is not None:
            est.n_features_in_ = int(meta["n_features"])
        est.n_received_ = int(meta["n_received"])
        est._past = int(meta["past"])
        est._segment_open = bool(meta["segment_open"])
        for j, hm in enumerate(meta["held"]):
            if hm["sparse"]:
                parts = (arrays[f"held{j}.data"], arrays[f"held{j}.indices"], arrays[f"held{j}.indptr"])
                X = sp.csr_matrix(parts, shape=tuple(hm["shape"]))
            else:
                X = arrays[f"held{j}.X"]
            est._held.append((X, arrays[f"held{j}.y"]))
        for i, cm in enumerate(meta["candidates"]):
            if cm is None:
                est.candidates_.append(None)
                continue
            prefix = f"c{i}."
            sub = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            est.candidates_.append(estimator_from_state(sub, cm))
        est._score = np.array(arrays["score"], dtype=np.int64).reshape(-1, 4)
        est._hits = [np.array(arrays[f"hits{i}"], dtype=np.int8) for i in range(est._score.shape[0])]
        est.settings_ = [{"early": False, **s} for s in meta["settings"]]
        est.rungs_ = [dict(r) for r in meta["rungs"]]
        if meta.get("gamma_scale") is not None:
            est.gamma_scale_ = float(meta["gamma_scale"])
        if meta.get("race_size") is not None:
            est.race_size_ = int(meta["race_size"])
        elif est.settings_:  # saved before race_size: every candidate raced
            est.race_size_ = len(est.settings_)
        est._race_end_detections = int(meta.get("race_end_detections", 0))
        return est
