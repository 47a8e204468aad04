"""What the two races share: several models learning the same rows in the same order, scored
prequentially on a grid (:mod:`.grid`), and the paired evidence that compares them
(:mod:`.evidence`).  The rules that decide who serves live with their models: successive
halving in :mod:`..selection` (the selector), promotion by evidence in the service's
``app/models/contest.py`` (challengers)."""

from .evidence import BETS, PairedEvidence, challenger_alpha, mcnemar_p
from .grid import CHALLENGER_GRID, SELECTION_GRID

__all__ = ["BETS", "CHALLENGER_GRID", "SELECTION_GRID", "PairedEvidence", "challenger_alpha", "mcnemar_p"]
