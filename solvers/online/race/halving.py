"""Successive halving, the selection rule of a :class:`~.core.Race` (Jamieson & Talwalkar,
*Non-stochastic best arm identification and hyperparameter optimization*, AISTATS 2016; River's
``SuccessiveHalvingClassifier``): at rung k the ``s`` models still racing are ranked by their
prequential accuracy over the scoring segment before the rung and ``ceil(s / eta)`` are kept.
Rung k is held once every racing model has learned ``first_rung · eta^(k-1)`` examples; its
scoring segment opens when they have learned half as many (at least the previous rung's).
Both are checked at the race's grid points only.

Until one model is left the best model is the leader rule's (:data:`LEADER_RULES`):
``"recent"`` — the best accuracy over the second half of what each learned; ``"evidence"`` —
the first racing model unless another is better by the one-sided exact McNemar test
(:func:`.evidence.mcnemar_p`) at level ``LEADER_ALPHA / m``, Bonferroni over the ``m`` others.

Imports nothing of the service and no numba.
"""

from __future__ import annotations

import math

import numpy as np

from .evidence import mcnemar_p

#: The leader rules (who serves while several race).
LEADER_RULES = ("recent", "evidence")
#: The evidence rule's family-wise level: a model replaces the first one only at p <= this / m.
LEADER_ALPHA = 0.05


class RungSchedule:
    """The rungs of successive halving, shared by :class:`SuccessiveHalving` (accuracy) and
    :class:`~.loss_halving.LossHalving` (squared error): when the scoring segment opens and when
    the rung is held, read from ``score[:, 3]`` (examples each model learned; ``score[:, :2]`` is
    the segment's, reset when it opens), ``rungs``, ``first_rung``, ``eta`` and ``segment_open``;
    the subclass ranks the models at :meth:`rung`."""

    def marks(self, race) -> tuple[int, int] | None:
        """``(learned at the next rung, at the start of its scoring segment)``, None once one
        model is left."""
        if len(race.racing()) <= 1:
            return None
        at = self.first_rung * self.eta ** len(self.rungs)
        before = self.first_rung * self.eta ** (len(self.rungs) - 1) if self.rungs else 0
        return int(math.ceil(at)), int(math.ceil(max(before, at / 2)))

    def decide(self, race) -> int | None:
        """At a grid point: open the scoring segment, or hold the rung, once every racing model
        has learned that many examples.  Returns the sole survivor when the race ended here."""
        marks = self.marks(race)
        if marks is None:
            return None
        learned = int(self.score[race.racing(), 3].min())
        if not self.segment_open and learned >= marks[1]:
            self.score[:, :2] = 0
            self.segment_open = True
        elif self.segment_open and learned >= marks[0]:
            self.segment_open = False
            return self.rung(race)
        return None


class SuccessiveHalving(RungSchedule):
    """The rule and its record: the prequential scores of every model, the open scoring
    segment, the rungs held.

    Parameters
    ----------
    n_models : int — models that started the race
    first_rung : int >= 1 — examples learned at the first rung
    eta : float > 1 — ``ceil(s / eta)`` of ``s`` kept at each rung
    leader : {"recent", "evidence"} — who serves while several race
    short : sequence of bool — models that retire at the first rung (unless only such race)
    before : int — examples received before the race's position counts (the rung records say
        ``received = before + position``)

    Attributes
    ----------
    score : (n_models, 4) int64 — per model: segment correct, segment total, all correct, all total
    hits : list of (m,) int8 — per model its 0/1 prequential hits in learning order
    rungs : list of dict — each rung's position, scores and the models kept
    segment_open : bool
    """

    def __init__(self, n_models, *, first_rung, eta, leader="recent", short=(), before=0):
        self.first_rung, self.eta, self.leader = first_rung, eta, leader
        self.short = list(short) + [False] * (int(n_models) - len(short))
        self.before = int(before)
        self.score = np.zeros((int(n_models), 4), dtype=np.int64)
        self.hits = [np.zeros(0, dtype=np.int8) for _ in range(int(n_models))]
        self.rungs: list[dict] = []
        self.segment_open = False

    # ------------------------------------------------------------------ scoring
    def record(self, i: int, hits: np.ndarray) -> None:
        """Model ``i``'s prequential hits (bool (m,)) on the rows it learned last."""
        correct, m = int(np.count_nonzero(hits)), int(hits.shape[0])
        self.score[i] += (correct, m, correct, m)
        self.hits[i] = np.concatenate([self.hits[i], hits.astype(np.int8)])

    def recent_accuracy(self, i: int) -> float:
        """Model ``i``'s accuracy over the second half of what it learned (the start-up, where
        wide kernels learn fastest, does not count)."""
        hits = self.hits[i]
        recent = hits[hits.shape[0] // 2 :]
        return float(recent.mean()) if recent.shape[0] else 0.0

    def recent_hits(self, racing) -> np.ndarray:
        """The racing models' hits over the second half of the examples they all learned,
        (len(racing), m) int8, aligned column by column."""
        n = min(self.hits[i].shape[0] for i in racing)
        return np.stack([self.hits[i][n // 2 : n] for i in racing]) if racing else np.zeros((0, 0), np.int8)

    # ------------------------------------------------------------------ the rule
    def rung(self, race) -> int | None:
        """Keep the best ``ceil(s / eta)`` by segment accuracy (ties: the earlier model); a
        short model retires here.  Returns the sole survivor when one is left."""
        alive = race.racing()
        seg = self.score[alive]
        acc = np.where(seg[:, 1] > 0, seg[:, 0] / np.maximum(seg[:, 1], 1), 0.0)
        ranked = [j for j in range(len(alive)) if not self.short[alive[j]]] or list(range(len(alive)))
        order = sorted(ranked, key=lambda j: (-acc[j], alive[j]))
        keep = sorted(alive[j] for j in order[: int(math.ceil(len(alive) / self.eta))])
        for i in alive:
            if i not in keep:
                race.drop(i)
                self.hits[i] = np.zeros(0, dtype=np.int8)
        if len(keep) == 1:  # the race is over: the history is no longer read
            self.hits[keep[0]] = np.zeros(0, dtype=np.int8)
        self.rungs.append(
            {
                "received": self.before + int(race.position),
                "learned": int(seg[:, 3].min()),
                "accuracy": {str(alive[j]): float(acc[j]) for j in range(len(alive))},
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
            acc = [(self.recent_accuracy(i), self.score[i, 2] / max(self.score[i, 3], 1)) for i in alive]
            return alive[min(range(len(alive)), key=lambda j: (-acc[j][0], -acc[j][1], alive[j]))]
        return self.leader_test(race)["leader"]

    def leader_test(self, race, incumbent: int | None = None) -> dict:
        """The evidence rule's figures: ``incumbent`` (the first racing model, or the racing model
        ``incumbent``), ``leader``, and
        per other model its ``accuracy``, the discordant pairs ``better`` (it right, the
        incumbent wrong) and ``worse``, the one-sided exact McNemar ``p`` and whether it
        ``passes`` ``p <= LEADER_ALPHA / m`` (JSON-ready; keys of ``challengers`` are indices)."""
        alive = race.racing()
        if incumbent is not None and incumbent in alive:
            alive = [incumbent] + [i for i in alive if i != incumbent]
        if not alive:
            return {"incumbent": None, "leader": None, "window": 0, "level": None, "challengers": {}}
        hits = self.recent_hits(alive)
        acc = hits.mean(axis=1) if hits.shape[1] else np.zeros(len(alive))
        level = LEADER_ALPHA / max(len(alive) - 1, 1)
        out, leader = {}, 0
        for j in range(1, len(alive)):
            better = int(np.count_nonzero((hits[j] == 1) & (hits[0] == 0)))
            worse = int(np.count_nonzero((hits[j] == 0) & (hits[0] == 1)))
            p = mcnemar_p(better, worse)
            passes = bool(p <= level)
            out[str(alive[j])] = {"accuracy": float(acc[j]), "better": better, "worse": worse, "p": p,
                                  "passes": passes}  # fmt: skip
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
