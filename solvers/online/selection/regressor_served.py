"""The contract (:mod:`svmstream.solvers.contract`) and the saved state of the regression
selector (:class:`ServedRegressionSelection`, a mixin of
:class:`~.regressor.SelectionRegressor`): what the service asks of any model, answered by the
serving candidate, with the selector's own example account and race."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ...contract import DriftReport, ExampleAccount, Learned, ModelReport
from ..race.core import Race
from ..race.losses import absolute_errors
from .state import candidate_states, candidates_from_states


class ServedRegressionSelection:
    """Mixin: the :class:`~svmstream.solvers.contract.OnlineModel` names of the regression selector."""

    TASK = "regression"
    HAS_CLASSES = False
    LEARNS_ONLINE = True
    STATE_VERSION = 1

    def fitted(self) -> bool:
        return self.__sklearn_is_fitted__()

    def input_width(self) -> int | None:
        return int(self.n_features_in_) if self.fitted() else None

    def class_count(self):
        return None

    def add_class(self, label):
        raise ValueError("a regression model has no classes")

    def serves(self) -> bool:
        return self.fitted() and self._leader().serves()

    def last_learned(self) -> Learned | None:
        return self.__dict__.get("_last")

    def paired_loss(self, X, y, decision=None):
        """(n,) float64 absolute errors of the serving candidate's predictions."""
        return absolute_errors(self.decision_function(X) if decision is None else decision, y)

    def loss_scale(self):
        return self._leader().loss_scale() if self.fitted() else None

    def nonfinite(self, X=None) -> str | None:
        return self._leader().nonfinite(X) if self.fitted() else None

    def drift(self) -> DriftReport:
        """The serving candidate's detections; ``actionable``: the survivor's since the race ended."""
        if not self.fitted():
            return DriftReport()
        drift = self._leader().drift()
        survivor = self.survivor_
        actionable = 0 if survivor is None else max(0, survivor.drift_detections_ - self._race_end_detections)
        return DriftReport(drift.detections, drift.last_at, int(actionable))

    def report(self) -> ModelReport:
        """The serving candidate's figures with the selector's account and the race under
        ``statistics["selection"]``."""
        frozen = self.__dict__.get("_published_report")
        if frozen is not None:
            return frozen
        if not self.fitted():
            return ModelReport(task=self.TASK, has_classes=False)
        leader = self._leader().report()
        account = leader.examples
        return replace(
            leader,
            examples=ExampleAccount(int(self.n_received_), account.learned, account.pending),
            statistics={**leader.statistics, "selection": self.race()},
            drift=self.drift(),
        )

    def warm_start(self):
        """The sole survivor's warm copy once the race is over (None before)."""
        survivor = self.survivor_ if self.fitted() else None
        return None if survivor is None else survivor.warm_start()

    def serving_settings(self):
        """Once the race is over: the survivor's numeric ``gamma`` and its ``rehearsal`` (a drift
        challenger is a plain pipeline with them); None while candidates race."""
        survivor = self.survivor_ if self.fitted() else None
        if survivor is None or not survivor._learned():
            return None
        return {"gamma": float(survivor.engine_.gamma_), "rehearsal": int(survivor.rehearsal)}

    def grow_features(self, n_features: int):
        """Widen every racing candidate to ``n_features`` inputs."""
        for i in self.race_.racing():
            self.race_.models[i].grow_features(n_features)
        self.n_features_in_ = max(int(self.n_features_in_), int(n_features))
        return self

    def estimate_bytes(self, n_features: int, n_classes: int) -> int:
        """The racing candidates' estimates (:meth:`~..tasks.StreamingRegressor.estimate_bytes`)
        at width ``n_features``: all that fit ``max_bytes`` race until the first rung."""
        return self.race_size(n_features) * self._pipeline(1.0, 0).estimate_bytes(n_features, 0)

    def published_copy(self):
        """What predictions read: a selector holding only the serving candidate's
        ``published_copy()``, reporting what this one reports now (frozen).  Not saved:
        :meth:`get_state` of a published copy raises TypeError."""
        check_is_fitted(self)
        report = self.report()
        out = copy.copy(self)
        race = self.race_
        models = [None] * len(race.models)
        best = race.best
        if best is not None:
            models[best] = race.models[best].published_copy()
        out.race_ = Race(models, grid=race.grid, rule=copy.deepcopy(race.rule), position=race.position)
        out._published_report = report
        return out

    # ------------------------------------------------------------------ saved state
    def get_state(self):
        """``(arrays, meta)``: each racing candidate's state under ``c{i}.``, the rule's record."""
        check_is_fitted(self)
        if "_published_report" in self.__dict__:
            raise TypeError("a published copy of a selector holds its leader only: save the selector itself")
        rule = self.race_.rule
        arrays = {"score": rule.score.copy()}
        arrays.update({f"losses{i}": losses for i, losses in enumerate(rule.losses)})
        cands = candidate_states(self.race_.models, arrays)
        engine = None if self.estimator is None else {"name": type(self.estimator).__name__,
                                                       "params": self.estimator.get_params()}  # fmt: skip
        params = {k: v for k, v in self.get_params(deep=False).items() if k != "estimator"}
        meta = {
            "estimator": type(self).__name__, "state_version": self.STATE_VERSION, "params": params,
            "engine": engine, "seed": int(self.seed_), "n_received": int(self.n_received_),
            "n_features": int(self.n_features_in_), "position": int(self.race_.position),
            "segment_open": bool(rule.segment_open), "rungs": rule.rungs, "settings": self.settings_,
            "candidates": cands, "race_end_detections": int(self._race_end_detections),
        }  # fmt: skip
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta):
        """Rebuild from :meth:`get_state`; the result continues exactly as the saved one would."""
        from ...persistence import _ESTIMATORS

        params = dict(meta["params"])
        if params.get("candidates") is not None:
            params["candidates"] = [dict(c) for c in params["candidates"]]
        if params.get("pipeline_params") is not None:
            params["pipeline_params"] = dict(params["pipeline_params"])
        engine = meta.get("engine")
        estimator = None if engine is None else _ESTIMATORS[engine["name"]](**engine["params"])
        est = cls(estimator, **params)
        est.seed_, est.n_received_ = int(meta["seed"]), int(meta["n_received"])
        est.n_features_in_ = int(meta["n_features"])
        est.settings_ = [dict(s) for s in meta["settings"]]
        models = candidates_from_states(arrays, meta["candidates"])
        est._new_race(models, position=int(meta["position"]))
        rule = est.race_.rule
        rule.score = np.array(arrays["score"], dtype=np.float64).reshape(-1, 4)
        rule.losses = [np.array(arrays[f"losses{i}"], dtype=np.float64) for i in range(rule.score.shape[0])]
        rule.rungs = [dict(r) for r in meta["rungs"]]
        rule.segment_open = bool(meta["segment_open"])
        est._race_end_detections = int(meta["race_end_detections"])
        est._last = Learned(np.zeros(0), np.zeros(0))
        return est
