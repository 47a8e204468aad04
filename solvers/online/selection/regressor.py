"""The regression selector: :class:`SelectionRegressor`, the model of a regression stream with no
settings — candidate :class:`~..tasks.StreamingRegressor` pipelines that differ by γ (a factor of
"scale") learn the same rows in the same order and race by successive halving on their
prequential squared error (:class:`~..race.loss_halving.LossHalving`) on the selection grid; the
leader (or the sole survivor) serves.  Its contract and saved state: :mod:`.regressor_served`."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ...budgeted._weights import checked_weights
from ...contract import Learned
from ...persistence import register_estimator
from ..race.core import Race
from ..race.grid import SELECTION_GRID
from ..race.loss_halving import LEADER_RULES, LossHalving
from ..tasks import StreamingRegressor, _finite_rows
from .candidates import checked_candidates
from .regressor_served import ServedRegressionSelection

#: The default candidates: γ = "scale" (the batch ``SVR()`` default on standardised inputs) and a
#: twice wider kernel (chosen against {1, 0.1} and {1, 0.5, 0.25} on four sets, both orders:
#: docs/regression.md "The race").
DEFAULT_REGRESSION_CANDIDATES = ({"gamma_factor": 1.0}, {"gamma_factor": 0.5})


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


#: The pipeline parameters the selector sets itself (each candidate's γ factor and seed).
OWN_PARAMS = ("gamma_factor", "random_state")


@register_estimator
class SelectionRegressor(ServedRegressionSelection, RegressorMixin, BaseEstimator):
    """Successive halving over regression pipelines that differ by γ: the no-settings regressor.

    Parameters
    ----------
    estimator : BudgetedSCARegressor, BudgetedSGDRegressor or None
        Every candidate's engine (cloned; its ``gamma`` must be "scale"); None: the pipeline's
        default (``BudgetedSCARegressor(merge_solver="lookup-wd")``).
    candidates : sequence of dict or None, default=None
        Each ``{"gamma_factor": f}`` (float > 0): a candidate with γ = f × "scale" of its scaled
        warm-up window; None: :data:`DEFAULT_REGRESSION_CANDIDATES`.  Ties go to the earlier.
    pipeline_params : dict or None, default=None
        Every candidate's :class:`~..tasks.StreamingRegressor` parameters (``warmup``,
        ``scaling``, ``rehearsal``, ``rehearsal_memory``, ...), not ``gamma_factor`` or
        ``random_state`` (the selector's).
    first_rung : int >= 1, default=2000
        Examples every candidate has learned at the first rung.
    eta : float > 1, default=2.0
        ``ceil(s / eta)`` of ``s`` survivors kept at each rung.
    leader : {"evidence", "recent"}, default="evidence"
        Who serves while several race (:mod:`..race.loss_halving`; a short stream ends so): the
        first candidate (γ = "scale") unless another has the smaller squared error on
        significantly more of the recent rows (the sign test), or the lowest recent squared
        error (``"recent"``: measured noisier on short streams, docs/regression.md).
    max_bytes : int >= 0 or None, default=None
        Bytes the race may take: only the first candidates whose estimates
        (:meth:`~..tasks.StreamingRegressor.estimate_bytes` at the first batch's width) fit
        start (at least one); None: every candidate races.
    random_state : int or None, default=None
        The seed every candidate shares (the window's order, the rehearsal draws: the candidates'
        errors are paired); None: one drawn at the first batch and kept (``seed_``).

    Attributes
    ----------
    race_ : Race — the candidates (None: dropped), the grid, the rule and its record
    settings_ : list of dict — each candidate's ``gamma_factor``
    n_received_ : int — rows received (every candidate received them all)
    n_features_in_ : int

    Raises
    ------
    ValueError
        On an invalid parameter or candidate (naming it), non-finite input or a non-numeric
        target; nothing changes then.

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.online.selection.regressor import SelectionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (3000, 3)); y = 10 * X[:, 0] + rng.normal(size=3000)
    >>> sel = SelectionRegressor(candidates=[{"gamma_factor": 1.0}, {"gamma_factor": 0.1}],
    ...                          first_rung=1000, random_state=0)
    >>> for lo in range(0, 3000, 500):
    ...     sel = sel.partial_fit(X[lo:lo + 500], y[lo:lo + 500])
    >>> sel.n_survivors_, sel.settings_[sel.leader_]["gamma_factor"], len(sel.race()["rungs"])
    (1, 0.1, 1)
    >>> bool(np.sqrt(np.mean((sel.predict(X[:500]) - y[:500]) ** 2)) < 1.5)
    True
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["partial_fit", "stream_steps"]), None],
        "candidates": [list, tuple, None],
        "pipeline_params": [dict, None],
        "first_rung": [Interval(Integral, 1, None, closed="left")],
        "eta": [Interval(Real, 1, None, closed="neither")],
        "leader": [StrOptions(set(LEADER_RULES))],
        "max_bytes": [Interval(Integral, 0, None, closed="left"), None],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self, estimator=None, *, candidates=None, pipeline_params=None, first_rung=2000, eta=2.0,
        leader="evidence", max_bytes=None, random_state=None,
    ):  # fmt: skip
        self.estimator = estimator
        self.candidates = candidates
        self.pipeline_params = pipeline_params
        self.first_rung = first_rung
        self.eta = eta
        self.leader = leader
        self.max_bytes = max_bytes
        self.random_state = random_state

    def __sklearn_is_fitted__(self):
        return "race_" in self.__dict__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # CSR rows are learned dense (the task pipelines' kernels)
        return tags

    # ------------------------------------------------------------------ parameters
    def _candidate_list(self) -> list[dict]:
        """The candidates as dicts, checked (ValueError naming the candidate and key)."""
        raw = DEFAULT_REGRESSION_CANDIDATES if self.candidates is None else self.candidates
        checked = checked_candidates(raw, {"gamma_factor": Real})
        return [{"gamma_factor": float(cand.get("gamma_factor", 1.0))} for cand in checked]

    def check_params(self):
        """Validate the parameters, the candidates and a candidate pipeline; returns self."""
        self._validate_params()
        self._candidate_list()
        own = sorted(set(OWN_PARAMS) & set(self.pipeline_params or {}))
        if own:
            raise ValueError(f"pipeline_params: {own[0]} is the selector's own parameter")
        probe = self._pipeline(1.0, 0)
        probe.check_params()
        engine = probe.estimator if probe.estimator is not None else probe._default_engine()
        if not isinstance(engine.gamma, str):
            raise ValueError(
                f'estimator: the race varies gamma (factors of "scale"); got gamma={engine.gamma!r}'
            )
        return self

    def _pipeline(self, factor: float, seed: int) -> StreamingRegressor:
        engine = None if self.estimator is None else clone(self.estimator)
        return StreamingRegressor(
            engine, **(self.pipeline_params or {}), gamma_factor=factor, random_state=seed
        )

    def _begin(self, d: int) -> None:
        self.check_params()
        seed = self.random_state
        self.seed_ = int(np.random.SeedSequence().generate_state(1)[0] >> 1) if seed is None else int(seed)
        self.settings_ = self._candidate_list()
        racing = self.race_size(d)
        models = [self._pipeline(s["gamma_factor"], self.seed_) if i < racing else None
                  for i, s in enumerate(self.settings_)]  # fmt: skip
        self._new_race(models)
        self.n_received_ = 0
        self.n_features_in_ = int(d)
        self._race_end_detections = 0
        self._last = Learned(np.zeros(0), np.zeros(0))

    def race_size(self, n_features: int) -> int:
        """How many candidates race at width ``n_features``: all, or the first that fit
        ``max_bytes`` (at least one)."""
        n = len(self._candidate_list())
        if self.max_bytes is None:
            return n
        one = self._pipeline(1.0, 0).estimate_bytes(n_features, 0)
        return int(max(1, min(n, int(self.max_bytes) // max(1, one))))

    def _new_race(self, models, position: int = 0) -> None:
        rule = LossHalving(len(models), first_rung=self.first_rung, eta=self.eta, leader=self.leader)
        self.race_ = Race(models, grid=SELECTION_GRID, rule=rule, position=position)

    # ------------------------------------------------------------------ learning
    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Every racing candidate learns rows X (n, d) with numeric targets y (n,) and importance
        weights ``sample_weight`` (n,) >= 0 (None: ones), cut at the selection grid, where the
        race is decided; ``classes`` is ignored.  Returns self.  ValueError on NaN/inf, a
        non-numeric y, a wrong width or a bad weight; nothing changes then (the whole batch is
        checked before any candidate learns)."""
        first = not self.__sklearn_is_fitted__()
        X, y = validate_data(self, X, y, reset=first, accept_sparse="csr", dtype=np.float64)
        if y.dtype.kind not in "iuf" or y.ndim != 1 or not np.all(np.isfinite(y)):
            raise ValueError(f"y must be a 1-D array of finite numbers (Unknown label type: {y.dtype})")
        X = _finite_rows(X)  # strings are not coerced
        weights = checked_weights(sample_weight, X.shape[0])
        if first:
            self._begin(X.shape[1])
        learned: dict[int, list[Learned]] = {}
        for lo, hi in self.race_.pieces(X.shape[0]):
            w = None if weights is None else weights[lo:hi]
            for i in self.race_.racing():
                self.race_.models[i].partial_fit(X[lo:hi], y[lo:hi], sample_weight=w)
                self._record(i, learned)
            if self.race_.advance(hi - lo):
                self._checkpoint()
        self.n_received_ += int(X.shape[0])
        self._keep_last(learned)
        return self

    def flush(self):
        """Every racing candidate learns what it holds (its open warm-up window); returns self."""
        if not self.__sklearn_is_fitted__():
            return self
        learned: dict[int, list[Learned]] = {}
        for i in self.race_.racing():
            est = self.race_.models[i]
            before = est.n_learned_
            est.flush()
            if est.n_learned_ > before:  # it learned its window now (else its last call's rows stand)
                self._record(i, learned)
        self._keep_last(learned)
        return self

    def fit(self, X, y):
        """One pass over X, y in the order given (a fresh selector), then :meth:`flush`."""
        for name in ("race_", "settings_", "seed_", "n_features_in_"):
            self.__dict__.pop(name, None)
        return self.partial_fit(X, y).flush()

    def _record(self, i: int, learned: dict) -> None:
        """Score what candidate ``i`` learned in its last call (its predictions before the steps)."""
        got = self.race_.models[i].last_learned()
        if got is None or not got.outputs.shape[0]:
            return
        self.race_.rule.record(i, (np.asarray(got.outputs) - np.asarray(got.targets)) ** 2)
        learned.setdefault(i, []).append(got)

    def _keep_last(self, learned: dict) -> None:
        """The serving candidate's predictions and targets of this call (the service's meters)."""
        parts = learned.get(self.leader_, []) if self.race_.racing() else []
        if not parts:
            self._last = Learned(np.zeros(0), np.zeros(0))
            return
        self._last = Learned(
            np.concatenate([p.outputs for p in parts]), np.concatenate([p.targets for p in parts])
        )

    def _checkpoint(self) -> None:
        survivor = self.race_.decide()
        if survivor is not None:  # the race is over: detections count from here
            self._race_end_detections = int(self.race_.models[survivor].drift_detections_)

    # ------------------------------------------------------------------ predictions
    def _leader(self) -> StreamingRegressor:
        check_is_fitted(self)
        return self.race_.best_model

    @property
    def warmup(self) -> int:
        """Rows of every candidate's warm-up window (its pipeline's ``warmup``)."""
        return int(self._pipeline(1.0, 0).warmup)

    @property
    def leader_(self) -> int:
        """The candidate that serves (the sole survivor after the last rung)."""
        check_is_fitted(self)
        return self.race_.best

    @property
    def n_survivors_(self) -> int:
        check_is_fitted(self)
        return len(self.race_.racing())

    @property
    def survivor_(self):
        """The sole surviving candidate once the race is over, else None."""
        check_is_fitted(self)
        alive = self.race_.racing()
        return self.race_.models[alive[0]] if len(alive) == 1 else None

    def predict(self, X):
        """ŷ (n,) float64 of the serving candidate (the window's mean target while warming up)."""
        X = validate_data(self, X, reset=False, accept_sparse="csr", dtype=np.float64)
        return self._leader().predict(X.toarray() if sp.issparse(X) else X)

    def decision_function(self, X):
        """ŷ (n,) float64; raises ``WarmingUp`` while the warm-up window is open."""
        X = validate_data(self, X, reset=False, accept_sparse="csr", dtype=np.float64)
        return self._leader().decision_function(X.toarray() if sp.issparse(X) else X)

    def predict_interval(self, X, level=0.9):
        """(lower, upper) of the serving candidate (:meth:`~..tasks.StreamingRegressor.predict_interval`)."""
        return self._leader().predict_interval(X, level)

    def half_width(self, level: float) -> float:
        return self._leader().half_width(level)

    def race(self) -> dict:
        """The race as JSON: each candidate's ``gamma_factor``, whether it races, rows learned
        (scored) and its recent mean squared error (while several race), the ``rungs``, the
        ``leader``, the ``leader_rule`` (with the evidence rule, its ``leader_test``) and the
        serving candidate's warm-up ``window`` (rows ``held`` of ``warmup``)."""
        check_is_fitted(self)
        rule, alive = self.race_.rule, self.race_.racing()
        cands = [
            {
                "settings": dict(setting),
                "racing": self.race_.models[i] is not None,
                "learned": int(rule.score[i, 3]),
                "recent_mse": _finite(rule.recent_mse(i))
                if self.race_.models[i] is not None and len(alive) > 1
                else None,
            }
            for i, setting in enumerate(self.settings_)
        ]
        leader = self.race_.models[self.race_.best] if alive else None
        test = rule.leader_test(self.race_) if len(alive) > 1 and self.leader == "evidence" else None
        window = None if leader is None else {"held": int(leader.n_pending_), "warmup": int(leader.warmup)}
        return {"candidates": cands, "rungs": [dict(r) for r in rule.rungs], "leader": self.race_.best,
                "leader_rule": self.leader, "leader_test": test, "window": window}  # fmt: skip
