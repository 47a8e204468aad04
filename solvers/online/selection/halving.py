"""Successive halving on the stream (Jamieson & Talwalkar, AISTATS 2016; River's
``SuccessiveHalvingClassifier``): the prequential scores of the candidates, the scoring
segments and rungs on the grid of :data:`CHECK_EVERY` received examples, the early rehearsal
that settles, the survivor (:class:`Halving`, a mixin of :class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

import math

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..race.grid import SELECTION_GRID

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
    """Mixin: the race's scores, rungs and survivors, and its JSON (:meth:`race`)."""

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
