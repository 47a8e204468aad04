"""The selector's race (:class:`~..race.core.Race` of its candidate pipelines on the selection
grid, decided by :class:`~..race.halving.SuccessiveHalving`): scoring what each candidate
learned, the grid points, the early rehearsal that settles, the survivor and the race's JSON
(:class:`Halving`, a mixin of :class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..race.core import Race
from ..race.grid import SELECTION_GRID
from ..race.halving import SuccessiveHalving

#: Rungs are decided every this many examples received past the window (at exact counts, so the
#: race does not depend on how the stream is cut into batches): the selection grid.
CHECK_EVERY = SELECTION_GRID


def _detections(pipeline):
    """Drift detections of a candidate pipeline (0 before it has learned)."""
    try:
        return int(pipeline.drift_.n_detections)
    except AttributeError:
        return 0


class Halving:
    """Mixin: the race, its scores, rungs and survivors, and its JSON (:meth:`race`)."""

    def _new_race(self, models, before=0):
        """The race of ``models`` on the selection grid (its rule's record empty)."""
        short = [bool(s.get("short", False)) for s in self.settings_]
        rule = SuccessiveHalving(len(models), first_rung=self.first_rung, eta=self.eta, leader=self.leader,
                                 short=short, before=before)  # fmt: skip
        self.race_ = Race(models, grid=CHECK_EVERY, rule=rule)

    def _rule(self):
        """The race's rule with this selector's parameters (``set_params`` may change them)."""
        rule = self.race_.rule
        rule.first_rung, rule.eta, rule.leader = self.first_rung, self.eta, self.leader
        return rule

    # the race's record under the selector's names (saved as such, :mod:`.state`)
    candidates_ = property(lambda self: self.race_.models, lambda self, v: setattr(self.race_, "models", v))
    _past = property(lambda self: self.race_.position, lambda self, v: setattr(self.race_, "position", v))
    _score = property(
        lambda self: self.race_.rule.score, lambda self, v: setattr(self.race_.rule, "score", v)
    )
    _hits = property(lambda self: self.race_.rule.hits, lambda self, v: setattr(self.race_.rule, "hits", v))
    rungs_ = property(
        lambda self: self.race_.rule.rungs, lambda self, v: setattr(self.race_.rule, "rungs", v)
    )
    _segment_open = property(
        lambda self: self.race_.rule.segment_open, lambda self, v: setattr(self.race_.rule, "segment_open", v)
    )

    @property
    def models(self):
        """The racing pipelines (River's ``ModelSelector.models``; None: out of the race)."""
        check_is_fitted(self)
        return self.race_.models

    @property
    def best_model(self):
        """The pipeline that predicts (River's ``ModelSelector.best_model``; the leader)."""
        return self._leader()

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
        self.race_.rule.record(i, pred == y)

    def _settled(self):
        """One candidate left, past its early rehearsal: the steady state."""
        alive = self._alive()
        return len(alive) == 1 and not self.settings_[alive[0]].get("early", False)

    def _alive(self):
        return self.race_.racing()

    def _checkpoint(self):
        """At a grid point (a multiple of :data:`CHECK_EVERY` received examples): settle the
        early rehearsals, then the rule opens the scoring segment or holds the rung."""
        self._settle()
        self._rule()
        survivor = self.race_.decide()
        if survivor is not None:  # the race is over
            self._race_end_detections = _detections(self.candidates_[survivor])

    def _settle(self):
        """Each candidate that has learned ``early_until`` examples goes from ``early_rehearsal``
        to ``rehearsal`` (the pipeline's parameter, which its rehearsal stage reads: saved as such)."""
        for i in self._alive():
            setting, est = self.settings_[i], self.candidates_[i]
            if setting["early"] and est.n_learned_ >= self.early_until:
                setting["early"] = False
                est.set_rehearsal(setting["rehearsal"])

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

    def race(self):
        """The race as JSON: ``candidates`` (each one's settings, whether it still races, examples
        learned, prequential accuracy over its last scored segment and over the second half of
        what it learned), ``rungs``, ``leader`` (None while the window is open), the ``leader_rule``
        and, while more than one races, the evidence rule's ``leader_test`` (:meth:`leader_test`)."""
        check_is_fitted(self)
        alive, rule = self._alive(), self._rule()
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
                    "recent_accuracy": rule.recent_accuracy(i)
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
            "window": {"held": self._n_held(), "warmup": self._window_rows()},
            "race_size": self.__dict__.get("race_size_"),
            "max_bytes": self.max_bytes,
        }
