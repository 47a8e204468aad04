"""One batch through a model's champion and challengers (:class:`Contest`), on the learner
thread: the champion learns the complete scoring cells first (:meth:`Contest.champion_step`,
the step the rollback journal replays), then :meth:`Contest.finish` runs the challengers cell
by cell, pairs their losses with the champion's, promotes on evidence, starts a challenger
after a drift detection and retires or drops challengers; the rows of an incomplete cell are
held for the next batch (:mod:`.challengers`).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from svmstream.app.models.challengers import CELL, Challenger, ChallengerSet, differences, drift_config
from svmstream.app.models.constant_guard import constant_margins
from svmstream.app.models.limits import set_bytes
from svmstream.app.models.rows import fitted, join_rows, learn_rows, losses_of, n_rows
from svmstream.app.models.view import check_finite
from svmstream.solvers.online.race.evidence import PairedEvidence

log = logging.getLogger("svmstream.challengers")


def _join_weights(held_w, n_held: int, w, n: int):
    """The weights of the held rows then a batch's (None when both are unit weights)."""
    if held_w is None and w is None:
        return None
    held_w = np.ones(n_held) if held_w is None else held_w
    return np.concatenate([held_w, np.ones(n) if w is None else np.asarray(w, dtype=np.float64)])


def _detections(est) -> int:
    """The detections a drift challenger may start on (a selector's: its sole survivor's since
    the race ended): the contract's ``drift().actionable``."""
    return int(est.drift().actionable) if fitted(est) else 0


class Contest:
    """One batch (``X`` (n, d) dense or CSR, ``y`` (n,): class indices, a regressor's targets or
    a novelty model's evaluation labels, ``n_classes``) of a model with a :class:`ChallengerSet`:
    the held rows and ``X`` cut on the grid of :data:`CELL` received examples; ``flush``: learn
    the held rows and flush every model; ``labelled``: ``y`` are class labels, whose one-class
    runs hold their pairs (:mod:`.label_runs`; targets and evaluation labels have no runs)."""

    def __init__(
        self, cs: ChallengerSet, X=None, y=None, n_classes: int = 2, *, flush: bool = False, weights=None,
        labelled: bool = True,
    ):  # fmt: skip
        self.cs = cs
        self.flush = flush
        self.labelled = labelled
        self.n_classes = n_classes
        held = cs.n_held()
        if X is None:
            X, y, weights = cs.held_X, cs.held_y, cs.held_w
        else:
            weights = _join_weights(cs.held_w, n_rows(cs.held_X), weights, int(X.shape[0]))
            X = join_rows(cs.held_X, X)
            y = y if cs.held_y is None else np.concatenate([cs.held_y, y])
        #: (n,) float64 importance weights of the rows (held first; None: every row weighs 1):
        #: the champion and every challenger learn the same weighted stream
        self.w = weights
        self.X, self.y = X, (np.zeros(0, np.int64) if y is None else np.asarray(y))  # its dtype kept
        self.first = cs.position - held  # the position of the first row (a grid point)
        n = 0 if X is None else int(X.shape[0])
        race = cs.race(position=self.first)
        self.pieces = race.pieces(n)  # cut at the race's grid points; an open last cell is held
        if self.pieces and not flush and not race.on_grid(self.first + self.pieces[-1][1]):
            self.pieces.pop()
        self.learned = self.pieces[-1][1] if self.pieces else 0
        self.scoring = bool(cs.entries) or cs.spawn_at is not None
        self.can_spawn = cs.spawn_at is None and cs.may_spawn()
        #: the champion's paired losses per piece (None: not scored, or not predicting yet)
        self.champion_right: list[np.ndarray | None] = []
        self.champion_detections: list[int] = []
        self.detections_before = 0
        self.margins: list[np.ndarray] = []  # the champion's prequential margins and labels
        self.learned_y: list[np.ndarray] = []
        #: warm starts of drift challengers: the champion copied where one may start (position → copy)
        self.warm_at: dict[int, Any] = {}
        #: per challenger (id): whether its prequential decisions on the last cell were constant
        self.constant: dict[int, bool] = {}

    def rows(self, lo: int, hi: int):
        """``(X, y)`` of rows ``lo:hi`` of the batch (held rows first)."""
        return self.X[lo:hi], self.y[lo:hi]

    def weights(self, lo: int, hi: int):
        """The importance weights of rows ``lo:hi`` (None: ones)."""
        return None if self.w is None else self.w[lo:hi]

    def champion_step(self, est):
        """The champion's step: predict then learn each complete cell (flush: then flush).
        Records its right/wrong per cell while it is scored and its drift detections.  While
        nothing is scored (no challenger, none due to start) the rows of the open cell are
        learned too instead of held: the champion's model does not depend on how its rows are
        cut, and a challenger that a detection starts begins at the next grid point either way."""
        self.champion_right, self.champion_detections, self.margins, self.learned_y = [], [], [], []
        self.detections_before = _detections(est)
        scoring = self.scoring
        starts = {self.cs.spawn_at} if self.cs.policy.drift_start != "fresh" else None
        for lo, hi in self.pieces:
            scoring = self._champion_piece(est, lo, hi, scoring, starts)
        n = 0 if self.X is None else int(self.X.shape[0])
        if not scoring and self.learned < n:
            self.pieces.append((self.learned, n))
            self.learned = n
            self._champion_piece(est, *self.pieces[-1], scoring, starts)
        if self.flush and fitted(est):
            est.flush()
            self._keep_margins(est)  # the rows the flush learned count in the prequential accuracy
        return self.X[:4] if self.X is not None and self.learned else None

    def replay_step(self):
        """The champion's step as the rollback journal replays it, once :meth:`champion_step`
        has run: the same rows learned in the same pieces (then the flush), holding only the
        batch's rows, labels and weights — not this contest's warm copies, margins or
        challengers (``app/models/rollback.py``: the journal's bytes are its input's)."""
        X, y, w, n_classes, flush = self.X, self.y, self.w, self.n_classes, self.flush
        pieces = list(self.pieces)

        def step(est):
            for lo, hi in pieces:
                learn_rows(est, X[lo:hi], y[lo:hi], n_classes, None if w is None else w[lo:hi])
            if flush and fitted(est):
                est.flush()
            return X[:4] if X is not None and pieces else None

        return step

    def _champion_piece(self, est, lo: int, hi: int, scoring: bool, starts: set | None) -> bool:
        """Rows ``lo:hi``: the champion's right/wrong (while scored), its step, its detections;
        a warm copy kept where a drift challenger may start.  Returns whether scoring is on."""
        Xp, yp = self.rows(lo, hi)
        if starts and self.first + lo in starts:
            self._copy_for_warm_start(est, self.first + lo)
        before = self.champion_detections[-1] if self.champion_detections else self.detections_before
        self.champion_right.append(losses_of(est, Xp, yp) if scoring else None)
        learn_rows(est, Xp, yp, self.n_classes, self.weights(lo, hi))
        self._keep_margins(est)
        after = _detections(est)
        self.champion_detections.append(after)
        if after > before:
            if self.can_spawn:
                scoring = True  # a challenger starts at the end of this cell
            if starts is not None:
                starts.add(-(-(self.first + hi) // CELL) * CELL)  # where finish() may start one
        return scoring

    def _copy_for_warm_start(self, est, position: int) -> None:
        """Keep a warm copy of the champion as it is at ``position`` (it learns the whole
        batch before the challengers do); none while it warms up or has not learned."""
        copy = est.warm_start()
        if copy is not None:
            self.warm_at[position] = copy

    def _keep_margins(self, est) -> None:
        last = est.last_learned()
        margins, learned = (None, None) if last is None else (last.outputs, last.targets)
        if margins is not None and learned is not None and len(margins) == len(learned):
            self.margins.append(np.asarray(margins))
            self.learned_y.append(np.asarray(learned))  # class indices, targets or evaluation labels

    # ------------------------------------------------------------------ after the champion
    def finish(self, champion, name: str) -> tuple[Any, Challenger | None]:
        """Learner thread, once the champion's step succeeded: the challengers, the evidence,
        promotions, drift challengers, retirements.  Returns ``(champion, promoted)``: the
        serving estimator (another one after a promotion) and the challenger promoted last."""
        cs = self.cs
        current, promoted = champion, None
        det_before = self.detections_before if champion is not None else 0
        for i, (lo, hi) in enumerate(self.pieces):
            Xp, yp = self.rows(lo, hi)
            start, end = self.first + lo, self.first + hi
            if cs.spawn_at is not None and cs.spawn_at <= start:
                self._spawn(current, name, start, ahead=promoted is None)
            rights = self._learn_challengers(Xp, yp, name, self.weights(lo, hi))
            if promoted is None:
                right, det = self.champion_right[i], self.champion_detections[i]
            else:
                right = losses_of(current, Xp, yp)
                before = _detections(current)
                learn_rows(current, Xp, yp, self.n_classes, self.weights(lo, hi))
                check_finite(current, Xp[:4])
                det_before, det = before, _detections(current)
            self._pair(right, rights, yp, current)
            cs.position = end
            if det > det_before and cs.spawn_at is None and cs.may_spawn():
                cs.spawn_at = -(-end // CELL) * CELL
                cs.record("drift detected", detections=det, challenger_at=cs.spawn_at)
            det_before = det
            if end % CELL == 0:
                current, won = self._grid_point(current, name)
                promoted = won or promoted
        self._hold_rest()
        if self.flush:
            self._flush_challengers(name)
        self.warm_at.clear()  # the warm copies not started: nothing needs them after the batch
        return current, promoted

    def _pair(self, right, rights, yp, champion) -> None:
        """Pair the champion's losses with each challenger's on one cell (the champion's
        ``loss_scale()``: None for 0/1 losses), run by run for class labels: a run's pairs are
        held until it ends (then counted) or proves improbable (then dropped,
        :mod:`.label_runs`).  ``right`` None: the champion did not predict (warm-up)."""
        entries = self.cs.entries
        scale = champion.loss_scale() if right is not None else None
        if not self.labelled:  # targets, evaluation labels: no runs, every pair counts now
            for entry, r in zip(entries, rights):
                if right is not None and r is not None:
                    entry.evidence.add_losses(right, r, scale=scale)
            return
        for lo, hi, new_run, void_before, void_after in self.cs.runs.pieces(yp):
            if new_run:
                for entry in entries:
                    entry.evidence.commit()
            if right is not None and not void_before:
                for entry, r in zip(entries, rights):
                    if r is not None:
                        entry.evidence.add_losses(right[lo:hi], r[lo:hi], scale=scale, tentative=True)
            if void_after and not void_before:
                for entry in entries:
                    entry.evidence.discard()

    def _learn_challengers(self, Xp, yp, name: str, wp=None) -> list[np.ndarray | None]:
        """Each challenger predicts then learns one cell (its paired losses, None while it does
        not predict); one that fails is dropped."""
        rights = []
        for entry in list(self.cs.entries):
            est = entry.ensure_estimator()
            try:
                margins: list[np.ndarray] = []
                right = losses_of(est, Xp, yp, margins)
                self.constant[id(entry)] = bool(margins) and constant_margins(margins[0], Xp)
                learn_rows(est, Xp, yp, self.n_classes, wp)
                check_finite(est, Xp[:4])
            except Exception as exc:
                index = self.cs.entries.index(entry)
                log.warning("model %r: challenger %d dropped: %s", name, index, exc)
                self.cs.remove(index, "dropped", reason=str(exc))
                continue
            entry.seen += int(Xp.shape[0])
            rights.append(right)
        return rights

    def _grid_point(self, current, name: str) -> tuple[Any, Challenger | None]:
        """At a grid point: promote the challenger with the most evidence past its threshold
        that did not predict the last cell constantly (:mod:`.constant_guard`), else retire a
        drift challenger past its horizon.  Returns ``(champion, promoted)``."""
        cs = self.cs
        race = cs.race(current, excluded=[self.constant.get(id(e), False) for e in cs.entries])
        winner = race.decide()  # the race's rule: promotion by the sequential test
        if winner is not None:
            best = cs.entries[winner - 1]
            return promote(cs, winner - 1, current, name, manual=False), best
        for index, entry in enumerate(cs.entries):
            if entry.origin == "drift" and entry.seen >= cs.policy.drift_horizon:
                cs.remove(index, "retired", reason=(
                    f"not better after {entry.seen} examples ({entry.evidence.n} paired)"))  # fmt: skip
                break
        return current, None

    def _spawn(self, current, name: str, start: int, *, ahead: bool) -> None:
        """Start the drift challengers at ``start`` (``Policy.drift_start``): a warm one (a copy
        of the champion at ``start``), a fresh one (the champion's settings), or both, each
        with no shuffle buffer, each in a free slot that fits ``max_model_bytes``.  A warm
        start the champion cannot give (no model past its warm-up) is a fresh one.  ``ahead``:
        ``current`` learned the whole batch already (its copy at ``start`` was kept)."""
        cs = self.cs
        cs.spawn_at = None
        if not cs.may_spawn():
            return
        kinds = ("warm", "fresh") if cs.policy.drift_start == "both" else (cs.policy.drift_start,)
        warm = self._warm_start(current, start, ahead) if "warm" in kinds else None
        estimators = [warm] if warm is not None else []
        if "fresh" in kinds or warm is None:
            estimators.append(None)
        config = drift_config(cs.champion_config, current.serving_settings() if current is not None else None)
        for est in estimators:
            if len(cs.entries) >= cs.policy.max_challengers or not self._fits(config, start):
                return
            self._start_drift_challenger(config, start, est, name)

    def _fits(self, config, start: int) -> bool:
        """Whether the champion, its challengers and one more (``config``) fit ``max_model_bytes``
        (if not, the history says so)."""
        cs = self.cs
        d = 0 if self.X is None else int(self.X.shape[1])
        size = (
            set_bytes([cs.champion_config, *(e.config for e in cs.entries), config], d, self.n_classes)
            if d
            else 0
        )
        if cs.policy.max_model_bytes is None or size <= cs.policy.max_model_bytes:
            return True
        cs.record("drift challenger not started", at=start, reason=(
            f"the champion and {len(cs.entries) + 1} challengers would need an estimated {size / 1e6:,.1f} MB, "
            f"over max_model_bytes = {cs.policy.max_model_bytes / 2**20:g} MiB"))  # fmt: skip
        return False

    def _start_drift_challenger(self, config, start: int, est, name: str) -> None:
        """Add a drift challenger started at ``start``: ``est`` a warm copy, or None (fresh)."""
        cs = self.cs
        cs.drift_started += 1
        entry = Challenger(config, differences(cs.champion_config, config), "drift", start,
                           PairedEvidence(cs.policy.window), est, drift_number=cs.drift_started)  # fmt: skip
        if est is not None:  # the copy counts what the champion counted
            entry.offset = cs.champion_start
        cs.entries.append(entry)
        kind = "fresh" if est is None else "warm"
        cs.record("drift challenger started", challenger=len(cs.entries) - 1, at=start, start=kind)
        log.warning("model %r: %s drift challenger started at example %d", name, kind, start)

    def _warm_start(self, current, start: int, ahead: bool):
        """The warm challenger's estimator at ``start``: the copy kept by the champion's step,
        or a copy of ``current`` (which is at ``start``); None (a fresh one) when the champion
        has no fitted model past its warm-up there."""
        if ahead:
            return self.warm_at.get(start)
        return current.warm_start() if current is not None else None

    def _hold_rest(self) -> None:
        """Hold the rows of the incomplete last cell until it completes (or a flush)."""
        cs = self.cs
        n = 0 if self.X is None else int(self.X.shape[0])
        if self.learned >= n:
            cs.held_X, cs.held_y, cs.held_w = None, None, None
            cs.position = self.first + n
            return
        cs.held_X, cs.held_y = self.X[self.learned :], self.y[self.learned :].copy()
        cs.held_w = None if self.w is None else self.w[self.learned :].copy()
        cs.position = self.first + n

    def _flush_challengers(self, name: str) -> None:
        for entry in list(self.cs.entries):
            if fitted(entry.estimator):
                try:
                    entry.estimator.flush()
                except Exception as exc:
                    index = self.cs.entries.index(entry)
                    log.warning("model %r: challenger %d dropped at a flush: %s", name, index, exc)
                    self.cs.remove(index, "dropped", reason=str(exc))


def promote(cs: ChallengerSet, index: int, champion, name: str, *, manual: bool) -> Any:
    """Make challenger ``index`` the champion (IndexError if there is none): record the event
    with its evidence, reset every other challenger's evidence (the champion changed) and
    return the new champion's estimator (fresh if it had not learned yet).  The old champion
    is retired: its settings and figures stay in the history."""
    entry = cs.entries[index]
    evidence = cs.evidence_of(entry)
    old = cs.champion_config
    cs.entries.pop(index)
    cs.record(
        "promoted", manual=manual, challenger=index, origin=entry.origin, start=entry.start, settings=entry.settings,
        config=entry.config.to_json(), previous=differences(entry.config, old) if old is not None else {},
        evidence=evidence,
    )  # fmt: skip
    cs.promotions += 1
    cs.champion_start = entry.received_before
    cs.drift_started = 0
    cs.champion_config = entry.config
    for other in cs.entries:
        other.evidence = PairedEvidence(cs.policy.window)
    log.warning("model %r: challenger %d promoted to champion %s (%s)", name, index,
                "manually" if manual else "on evidence", evidence)  # fmt: skip
    del champion
    return entry.ensure_estimator()
