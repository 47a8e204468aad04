"""Successive halving on a prequential loss, the selection rule of a regression
:class:`~.core.Race` (:class:`~..selection.regressor.SelectionRegressor`): the rule of
:mod:`.halving` (Jamieson & Talwalkar 2016) with the mean squared error of each model's
predictions made before its steps in place of the accuracy.  At rung k the ``s`` models still
racing are ranked by their mean squared error over the scoring segment before the rung and
``ceil(s / eta)`` are kept (ties: the earlier model); rung k is held once every racing model has
learned ``first_rung · eta^(k-1)`` examples, its segment opening at half as many.

Until one model is left the best model is the leader rule's (:data:`LEADER_RULES`):
``"recent"`` — the lowest mean squared error over the second half of what each learned;
``"evidence"`` — the first racing model unless another has the smaller squared error on
significantly more rows of that half than it has the larger one, by the one-sided exact sign
test (:func:`.evidence.mcnemar_p` of the two counts) at level ``LEADER_ALPHA / m``, Bonferroni
over the ``m`` others (every model learns the same rows in the same order: the errors are paired).

Imports nothing of the service and no numba.
"""

from __future__ import annotations

import math

import numpy as np

from .evidence import mcnemar_p
from .halving import LEADER_ALPHA, LEADER_RULES, RungSchedule

__all__ = ["LEADER_ALPHA", "LEADER_RULES", "LossHalving"]


class LossHalving(RungSchedule):
    """The rule and its record: every model's prequential squared errors, the open scoring
    segment, the rungs held.

    Parameters
    ----------
    n_models : int — models that started the race
    first_rung : int >= 1 — examples learned at the first rung
    eta : float > 1 — ``ceil(s / eta)`` of ``s`` kept at each rung
    leader : {"recent", "evidence"} — who serves while several race

    Attributes
    ----------
    score : (n_models, 4) float64 — per model: segment loss sum, segment rows, all loss sum, all rows
    losses : list of (m,) float64 — per model its squared errors in learning order (emptied once
        the model leaves the race, or once one model is left)
    rungs : list of dict — each rung's position, mean squared errors and the models kept
    segment_open : bool

    Examples
    --------
    >>> import numpy as np
    >>> from svmstream.solvers.online.race.core import Race
    >>> rule = LossHalving(2, first_rung=4, eta=2.0)
    >>> race = Race(["wide", "narrow"], grid=2, rule=rule)
    >>> decided = []
    >>> for _ in range(3):
    ...     rule.record(0, np.array([1.0, 1.0])); rule.record(1, np.array([0.25, 0.5]))
    ...     _ = race.advance(2); decided.append(race.decide())
    >>> decided, race.best_model, rule.rungs[0]["mse"]
    ([None, 1, None], 'narrow', {'0': 1.0, '1': 0.375})
    """

    def __init__(self, n_models, *, first_rung, eta, leader="recent"):
        if leader not in LEADER_RULES:
            raise ValueError(f"leader must be one of {list(LEADER_RULES)}, got {leader!r}")
        self.first_rung, self.eta, self.leader = first_rung, eta, leader
        self.score = np.zeros((int(n_models), 4), dtype=np.float64)
        self.losses = [np.zeros(0) for _ in range(int(n_models))]
        self.rungs: list[dict] = []
        self.segment_open = False

    # ------------------------------------------------------------------ scoring
    def record(self, i: int, squared_errors: np.ndarray) -> None:
        """Model ``i``'s prequential squared errors (m,) float64 on the rows it learned last."""
        errors = np.asarray(squared_errors, dtype=np.float64)
        total, m = float(errors.sum()), float(errors.shape[0])
        self.score[i] += (total, m, total, m)
        self.losses[i] = np.concatenate([self.losses[i], errors])

    def recent_mse(self, i: int) -> float:
        """Model ``i``'s mean squared error over the second half of what it learned (inf: none)."""
        losses = self.losses[i]
        recent = losses[losses.shape[0] // 2 :]
        return float(recent.mean()) if recent.shape[0] else math.inf

    def recent_losses(self, racing) -> np.ndarray:
        """The racing models' squared errors over the second half of the rows they all learned,
        (len(racing), m) float64, aligned column by column."""
        if not racing:
            return np.zeros((0, 0))
        n = min(self.losses[i].shape[0] for i in racing)
        return np.stack([self.losses[i][n // 2 : n] for i in racing])

    # ------------------------------------------------------------------ the rule (rungs: RungSchedule)
    def rung(self, race) -> int | None:
        """Keep the ``ceil(s / eta)`` of lowest segment mean squared error (ties: the earlier
        model).  Returns the sole survivor when one is left."""
        alive = race.racing()
        seg = self.score[alive]
        mse = np.where(seg[:, 1] > 0, seg[:, 0] / np.maximum(seg[:, 1], 1.0), math.inf)
        order = sorted(range(len(alive)), key=lambda j: (mse[j], alive[j]))
        keep = sorted(alive[j] for j in order[: int(math.ceil(len(alive) / self.eta))])
        for i in alive:
            if i not in keep:
                race.drop(i)
                self.losses[i] = np.zeros(0)
        if len(keep) == 1:  # the race is over: the history is no longer read
            self.losses[keep[0]] = np.zeros(0)
        self.rungs.append(
            {
                "position": int(race.position),
                "learned": int(seg[:, 3].min()),
                "mse": {str(alive[j]): float(mse[j]) for j in range(len(alive))},
                "scored": {str(alive[j]): int(seg[j, 1]) for j in range(len(alive))},
                "kept": keep,
            }
        )
        return keep[0] if len(keep) == 1 else None

    def best(self, race) -> int | None:
        """Who serves: the sole survivor, else the leader rule's choice."""
        alive = race.racing()
        if len(alive) <= 1:
            return alive[0] if alive else None
        if self.leader == "recent":  # ties: the whole prequential record, then model order
            keys = [(self.recent_mse(i), self.score[i, 2] / max(self.score[i, 3], 1.0), i) for i in alive]
            return min(keys)[2]
        return self.leader_test(race)["leader"]

    def leader_test(self, race) -> dict:
        """The evidence rule's figures (JSON-ready): the ``incumbent`` (first racing model), the
        ``leader``, and per other model its recent ``mse``, the rows where it had the smaller
        squared error (``better``) and the larger (``worse``), the one-sided exact sign test's
        ``p`` and whether it ``passes`` ``p <= LEADER_ALPHA / m``."""
        alive = race.racing()
        if not alive:
            return {"incumbent": None, "leader": None, "window": 0, "level": None, "challengers": {}}
        losses = self.recent_losses(alive)
        mse = losses.mean(axis=1) if losses.shape[1] else np.full(len(alive), math.inf)
        level = LEADER_ALPHA / max(len(alive) - 1, 1)
        out, leader = {}, 0
        for j in range(1, len(alive)):
            better = int(np.count_nonzero(losses[j] < losses[0]))
            worse = int(np.count_nonzero(losses[j] > losses[0]))
            p = mcnemar_p(better, worse)
            passes = bool(p <= level and mse[j] < mse[0])
            out[str(alive[j])] = {"mse": float(mse[j]), "better": better, "worse": worse, "p": p,
                                  "passes": passes}  # fmt: skip
            if passes and (leader == 0 or mse[j] < mse[leader]):
                leader = j
        return {
            "incumbent": alive[0],
            "incumbent_mse": float(mse[0]),
            "leader": alive[leader],
            "window": int(losses.shape[1]),
            "level": level,
            "challengers": out,
        }
