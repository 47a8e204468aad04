"""Which candidate predicts while several race: the leader rules (``"recent"``: the best recent
prequential accuracy; ``"evidence"``: the first survivor unless another is better by a
one-sided exact McNemar test, Bonferroni over the others) (:class:`LeaderRule`, a mixin of
:class:`~.classifier.SelectionClassifier`)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ...budgeted import WarmingUp
from ..race.evidence import mcnemar_p

#: The leader rules (:attr:`SelectionClassifier.leader_`).
LEADER_RULES = ("recent", "evidence")
#: The evidence rule's family-wise level: a survivor replaces the first one only at p <= this / m.
LEADER_ALPHA = 0.05


class LeaderRule:
    """Mixin: ``leader_``, the leader test and the leader itself."""

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

    def _leader(self):
        check_is_fitted(self)
        if not self._alive():
            raise WarmingUp(
                f"{type(self).__name__} is warming up: {self._n_held()} of {self.warmup} examples received"
            )
        return self.candidates_[self.leader_]

    def _n_held(self):
        return sum(int(X.shape[0]) for X, *_ in self._held)
