"""Promotion by a sequential test, the challenger rule of a :class:`~.core.Race`:
``models[0]`` is the champion and serves; ``models[1:]`` are challengers, each with its paired
evidence against the champion (:class:`.evidence.PairedEvidence`, the betting e-value) and the
level it is tested at (:func:`.evidence.challenger_alpha`).  At a grid point the challenger
with the largest e-value among those past ``1/α`` with at least ``min_examples`` pairs (and
not excluded, e.g. one that predicted the last cell constantly) replaces the champion.

Imports nothing of the service and no numba.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .evidence import PairedEvidence


class Promotion:
    """The rule of a champion and its challengers.

    Parameters
    ----------
    evidence : sequence of PairedEvidence — challenger ``j``'s (``models[j + 1]``)
    levels : sequence of float in (0, 1] — the level each challenger is tested at
    min_examples : int >= 0 — pairs a challenger needs before it may be promoted
    excluded : sequence of bool or None — challengers that may not be promoted now

    Examples
    --------
    >>> from svmstream.solvers.online.race.core import Race
    >>> ev = PairedEvidence(10)
    >>> ev.add(np.zeros(40, bool), np.ones(40, bool))  # the challenger right 40 times, the champion never
    >>> Race(["champion", "challenger"], grid=128, rule=Promotion([ev], [0.025], 20)).decide()
    1
    """

    def __init__(
        self,
        evidence: Sequence[PairedEvidence],
        levels: Sequence[float],
        min_examples: int,
        excluded: Sequence[bool] | None = None,
    ):
        self.evidence = list(evidence)
        self.levels = list(levels)
        self.min_examples = int(min_examples)
        self.excluded = list(excluded) if excluded is not None else [False] * len(self.evidence)

    def best(self, race) -> int | None:
        """The champion serves until a promotion."""
        return 0 if race.models else None

    def decide(self, race) -> int | None:
        """The index in ``race.models`` of the challenger promoted at this grid point, or None."""
        best, best_log = None, -np.inf
        for j, ev in enumerate(self.evidence):
            log_e = ev.log_e_value()
            if (
                ev.n >= self.min_examples
                and log_e >= np.log(1.0 / self.levels[j])
                and log_e > best_log
                and not self.excluded[j]
            ):
                best, best_log = j + 1, log_e
        return best
