"""The race: several models that learn the same rows in the same order, scored prequentially
(each model predicts a row before it learns it) and compared at the points of one grid of
received examples, where a pluggable rule decides who serves.

Vocabulary (River's ``model_selection.ModelSelector``): :attr:`Race.models` are the racing
models (None: out of the race), :attr:`Race.best_model` the one that serves.  Two rules:

* successive halving (:class:`.halving.SuccessiveHalving`, the selector
  ``SelectionClassifier``): at its rungs it keeps the better half; until one is left the best
  model is its leader rule's;
* promotion by a sequential test (:class:`.promotion.Promotion`, the service's challengers):
  ``models[0]`` is the champion and serves; a challenger replaces it when its paired
  evidence (:class:`.evidence.PairedEvidence`) passes its level.

Deciding only at grid points makes a race independent of how the stream is cut into batches:
:meth:`Race.pieces` cuts a batch at the grid points.  The grid is a parameter of the race, one
value per rule (:mod:`.grid`: each rule's decision points were fixed on its own grid).

Imports nothing of the service and no numba.
"""

from __future__ import annotations

from typing import Any, Protocol


class RaceRule(Protocol):
    """What decides a race: who serves now (:meth:`best`, an index into ``race.models``, None
    when none races) and what changes at a grid point (:meth:`decide`: the index of the model
    that serves from now on when it changed, else None)."""

    def best(self, race: Race) -> int | None: ...

    def decide(self, race: Race) -> int | None: ...


class Race:
    """Several models racing on one grid.

    Parameters
    ----------
    models : list — the racing models, in a fixed order (ties go to the earlier); None marks a
        model out of the race (the list is the race's: :meth:`drop` writes None into it)
    grid : int >= 1 — received examples between decision points
    rule : RaceRule — who serves and what a grid point decides
    position : int >= 0 — examples the race has received (on the grid's scale)

    Examples
    --------
    >>> class First:
    ...     def best(self, race): return race.racing()[0] if race.racing() else None
    ...     def decide(self, race): return None
    >>> race = Race(["a", "b", None], grid=128, rule=First(), position=100)
    >>> race.racing(), race.best_model, race.pieces(300)
    ([0, 1], 'a', [(0, 28), (28, 156), (156, 284), (284, 300)])
    """

    __slots__ = ("models", "grid", "rule", "position")

    def __init__(self, models: list, *, grid: int, rule: RaceRule, position: int = 0):
        self.models = models
        self.grid = int(grid)
        self.rule = rule
        self.position = int(position)

    def racing(self) -> list[int]:
        """Indices of the models still racing (in order)."""
        return [i for i, model in enumerate(self.models) if model is not None]

    def drop(self, i: int) -> None:
        """Model ``i`` leaves the race."""
        self.models[i] = None

    @property
    def best(self) -> int | None:
        """The index of the model that serves (the rule's), None when none races."""
        return self.rule.best(self)

    @property
    def best_model(self) -> Any:
        """The model that serves (None when none races)."""
        best = self.best
        return None if best is None else self.models[best]

    def on_grid(self, position: int | None = None) -> bool:
        """Whether ``position`` (default: the race's) is a decision point."""
        return (self.position if position is None else int(position)) % self.grid == 0

    def pieces(self, n: int, *, first: int | None = None) -> list[tuple[int, int]]:
        """``n`` rows received from ``first`` (default: the race's position) cut at the grid
        points: ``[(lo, hi), ...]`` covering ``0:n``; every piece but possibly the last ends at a
        grid point."""
        first = self.position if first is None else int(first)
        ends = list(range(self.grid - first % self.grid, n + 1, self.grid))
        if not ends or ends[-1] < n:
            ends.append(n)
        return list(zip([0, *ends[:-1]], ends)) if n else []

    def advance(self, n: int) -> bool:
        """The race received ``n`` more rows; returns whether it now stands on a grid point."""
        self.position += int(n)
        return self.on_grid()

    def decide(self) -> int | None:
        """At a grid point: the rule's decision (the index that serves from now on if it
        changed, else None)."""
        return self.rule.decide(self)
