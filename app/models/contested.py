"""The challenger methods of :class:`~svmstream.app.models.handle.ModelHandle`: the set at
creation and restore, the end of a contested batch on the learner thread (promotion: the
model's configuration and estimator change), manual promotion and removal (queued on the
model's learner like a batch), and the description ``GET /models/{name}`` shows
(``docs/challengers.md``)."""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from svmstream.app.errors import ServiceError
from svmstream.app.models.challengers import ChallengerSet, Policy
from svmstream.app.models.contest import Contest, promote
from svmstream.app.models.copies import detached_state
from svmstream.app.models.rows import fitted

log = logging.getLogger("svmstream.challengers")


def challenger_set(challengers: Any, config, settings, follower: bool) -> ChallengerSet | None:
    """A handle's set from what it was given: a :class:`ChallengerSet`, a restored model's
    ``(saved, arrays)`` (arrays None: parked), or None.  A replica keeps no estimators."""
    if challengers is not None and not isinstance(challengers, ChallengerSet):
        saved, arrays = challengers
        policy = Policy.from_settings(settings)
        challengers = ChallengerSet.restore(saved, None if follower else arrays, policy) if saved else None
    if challengers is None:
        if config.on_drift != "challenger" or not config.learns_online:
            return None
        challengers = ChallengerSet(Policy.from_settings(settings))
    challengers.champion_config = config
    return challengers


def new_counted_configs(config, challengers: Any, settings) -> list:
    """What a new model's challengers count beside its champion in the size bounds
    (:meth:`ChallengerSet.counted_configs`; ``challengers`` as :func:`challenger_set` takes
    it).  A restored set counts nothing new: the model was admitted when it was created."""
    if challengers is not None and not isinstance(challengers, ChallengerSet):
        return []
    cs = challengers if challengers is not None else challenger_set(None, config, settings, False)
    return cs.counted_configs(config) if cs is not None else []


class Challenged:
    """Mixin: the methods above (the handle declares the slot ``challengers``)."""

    __slots__ = ()

    def _finish_contest(self, contest: Contest, est):
        """Learner thread, under its lock, after the champion's step: the challengers' part.
        Returns ``(champion, promoted)``; after a promotion the model's configuration is the
        promoted challenger's."""
        new, promoted = contest.finish(est if fitted(est) else None, self.name)
        if promoted is not None:
            self.config = self.challengers.champion_config
        new = new if fitted(new) else None
        self._est = new
        return new, promoted

    def _after_promotion(self, est) -> None:
        """Learner thread: the rollback checkpoint is the new champion (the journal's steps
        were the old one's), and its drift detections are the ones already logged."""
        self._checkpoint = detached_state(est) if est is not None else None
        self._journal, self._journal_bytes = [], 0
        self._drift_logged = 0 if est is None else int(est.drift().detections)

    def counted_configs(self) -> list:
        """The configurations counted beside the champion's in the size bounds
        (:meth:`ChallengerSet.counted_configs`; none without a set)."""
        cs = self.challengers
        return cs.counted_configs(self.config) if cs is not None else []

    def challengers_info(self, view=None) -> dict[str, Any]:
        """``{"challengers": [...], "promotion": {...}}`` as published with ``view`` (default the
        current one; the live set's when the view carries none; empty without a set)."""
        published = (self.view if view is None else view).challengers
        if published is not None:
            return published
        cs = self.challengers
        return cs.info() if cs is not None else {"challengers": [], "promotion": None}

    def submit_promote(self, index: int) -> Future:
        """Queue the manual promotion of challenger ``index``; the future gives the new view.
        Raises BatchModelReadOnly (or 409 on a replica), LearnerBusy, ModelClosed."""
        return self._submit_challenger_task(self._promote_now, index)

    def submit_remove_challenger(self, index: int) -> Future:
        """Queue the removal of challenger ``index``; the future gives the new view."""
        return self._submit_challenger_task(self._remove_now, index)

    def _submit_challenger_task(self, fn, index: int) -> Future:
        self._refuse_if_batch_trained()
        with self._lock:
            self._check_can_queue()
            return self._queue(self._challenger_task, fn, int(index))

    def _challenger_task(self, fn, index: int):
        """Learner thread: ``fn(index)`` under the learner's lock, then publish."""
        self._load_for_task()
        try:
            with self._est_lock:
                cs = self.challengers
                if cs is None or not 0 <= index < len(cs.entries):
                    n = 0 if cs is None else len(cs.entries)
                    raise ServiceError(
                        f"challenger: model {self.name!r} has no challenger {index} (it has {n})",
                        field="challenger",
                        status=404,
                    )
                fn(cs, index)
                return self._publish(self._est, self.codec, None)
        finally:
            with self._lock:
                self._pending -= 1

    def _promote_now(self, cs: ChallengerSet, index: int) -> None:
        est = promote(cs, index, self._est, self.name, manual=True)
        self.config = cs.champion_config
        self._est = est if fitted(est) else None
        self._after_promotion(self._est)

    def _remove_now(self, cs: ChallengerSet, index: int) -> None:
        cs.remove(index, "deleted")
        log.info("model %r: challenger %d deleted", self.name, index)
