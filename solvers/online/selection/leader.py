"""Which candidate predicts while several race: a window candidate before the first rung (a
stream that ended inside the warm-up window), else the best model of the selector's race by its
leader rule (:mod:`..race.halving`: ``"recent"``, the best recent prequential accuracy;
``"evidence"``, the first survivor unless another is better by a one-sided exact McNemar test,
Bonferroni over the others) (:class:`LeaderRule`, a mixin of
:class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

from sklearn.utils.validation import check_is_fitted

from ...budgeted import WarmingUp
from ..race.halving import LEADER_ALPHA, LEADER_RULES

__all__ = ["LEADER_ALPHA", "LEADER_RULES", "LeaderRule"]


class LeaderRule:
    """Mixin: ``leader_``, the leader test and the leader itself."""

    @property
    def leader_(self):
        """The candidate that predicts (index into ``candidates_``): the race's best model."""
        check_is_fitted(self)
        if not self._alive():
            raise AttributeError("no candidate before the warm-up window closes")
        self._rule()
        window = self._window_leader()
        return self.race_.best if window is None else window

    def _window_leader(self):
        """Before the first rung, with a window candidate racing (the stream ended inside the
        warm-up window: a flush started it on every row of the stream, which it learned in
        ``window_epochs`` passes): the evidence rule with the window candidate as the incumbent
        — another candidate leads only if it is better by the one-sided exact McNemar test on
        the paired prequential hits, Bonferroni over the others, at any ``leader`` setting
        (docs/selection.md, "Streams that end inside the window").  Else None."""
        if self.rungs_:
            return None
        window = next((i for i in self._alive() if self.settings_[i].get("window", False)), None)
        if window is None:
            return None
        return self.race_.rule.leader_test(self.race_, incumbent=window)["leader"]

    def _recent_accuracy(self, i):
        """Prequential accuracy of candidate ``i`` over the second half of what it has learned."""
        return self.race_.rule.recent_accuracy(i)

    def leader_test(self):
        """The evidence rule's figures (:meth:`~..race.halving.SuccessiveHalving.leader_test`):
        ``incumbent``, ``leader``, per other survivor ``accuracy``, ``better``, ``worse``, ``p``
        and ``passes`` (JSON-ready; keys of ``challengers`` are candidate indices)."""
        check_is_fitted(self)
        return self._rule().leader_test(self.race_)

    def _leader(self):
        check_is_fitted(self)
        if not self._alive():
            raise WarmingUp(
                f"{type(self).__name__} is warming up: {self._n_held()} of {self._window_rows()} examples received"
            )
        return self.candidates_[self.leader_]

    def _n_held(self):
        return sum(int(X.shape[0]) for X, *_ in self._held)
