"""The one-class runs of a model's received labels, as the paired test sees them.

Users send files in the order they have them, often sorted by label.  During a long run of
one class, prequential losses measure only how fast a model follows the run: a challenger with
no shuffle buffer predicts the run's class and "wins" every pair, and a promotion on that
evidence serves the class of the run (skin_nonskin in file order: 79 %, ``docs/challengers.md``).
So the pairs of a run are held until the run ends -- then they count -- or proves improbable --
then they, and the rest of the run's, are dropped (:class:`~.evidence.PairedEvidence`'s
``tentative`` pairs).  Which pairs count thus depends on the labels that follow them: the
test's guarantee (Ville's inequality) holds for the stream without the dropped runs.

The criterion is the run guard's (:func:`svmstream.solvers.online.stages.order.improbable_run`):
a run of class c is improbable when it is at least 1,000 rows long and q_c^run ≤ 1e-6, q_c being
c's share of the labels received so far -- the chance that an exchangeable stream with that
share shows such a run at a given point -- or when c is the only class received so far.  Here
it is applied to the received labels (the guard watches the rows the buffer releases).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from svmstream.solvers.online.stages.order import improbable_run


@dataclass
class LabelRuns:
    """The current run (class, length, whether it proved improbable) and the count of each
    class of the received labels."""

    run_class: int = -1
    run_len: int = 0
    counts: list[int] = field(default_factory=list)
    void: bool = False

    def pieces(self, y: np.ndarray) -> list[tuple[int, int, bool, bool, bool]]:
        """Receive class indices ``y`` (n,) int in order, cut where the label changes.  Returns
        one ``(lo, hi, new_run, void_before, void_after)`` per piece: whether it starts a new
        run, and whether its run had proved improbable before the piece / has after it."""
        y = np.asarray(y, dtype=np.int64)
        out = []
        starts = [0, *(np.flatnonzero(np.diff(y)) + 1).tolist()] if y.shape[0] else []
        for lo, hi in zip(starts, [*starts[1:], y.shape[0]]):
            c = int(y[lo])
            new_run = c != self.run_class
            if new_run:
                self.run_class, self.run_len, self.void = c, 0, False
            if c >= len(self.counts):
                self.counts.extend([0] * (c + 1 - len(self.counts)))
            before = self.void
            self.run_len += hi - lo
            self.counts[c] += hi - lo
            self.void = before or improbable_run(self.run_len, self.counts[c] / sum(self.counts))
            out.append((lo, hi, new_run, before, self.void))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"run_class": self.run_class, "run_len": self.run_len, "counts": list(self.counts),
                "void": self.void}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> LabelRuns:
        """From :meth:`to_json` (None: a set saved before runs were tracked -- a fresh tracker)."""
        if not data:
            return cls()
        return cls(int(data["run_class"]), int(data["run_len"]), [int(k) for k in data["counts"]],
                   bool(data.get("void", False)))  # fmt: skip
