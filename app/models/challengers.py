"""A model's challengers: full streaming models that learn the same examples as the champion
(the model that serves ``/predict``), in the same order, on the same learner thread, and are
promoted only on evidence (``docs/challengers.md``).

:class:`ChallengerSet` is the state: the challengers (:class:`Challenger`: settings,
estimator, :class:`~svmstream.solvers.online.race.evidence.PairedEvidence`), the model's position in
its stream, the rows held for the current scoring cell, a drift challenger due, and the
history of promotions.  :mod:`.contest` runs a batch through it; this module describes it,
saves it in the champion's snapshot and restores it.

Scoring cells.  Every model predicts the rows of a cell of :data:`CELL` received examples
before any of them learns the cell, so each paired loss is a genuine prequential loss and
every model is scored on the same rows with the same information.  Cells sit on a fixed grid
of the model's received examples: the rows of a cell not yet complete are *held* (pending:
``received = learned + pending``) until it completes or a flush learns them, so promotions,
drift challengers and the held rows do not depend on how the stream was cut into batches, and
exactly-once recovery rebuilds the same champion and challengers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import estimator_from_state, make_estimator
from svmstream.app.models.json_values import jsonable
from svmstream.app.models.label_runs import LabelRuns
from svmstream.app.models.rows import fitted, n_rows, rows_from_state, rows_state
from svmstream.solvers.online.race.core import Race
from svmstream.solvers.online.race.evidence import PairedEvidence, challenger_alpha
from svmstream.solvers.online.race.grid import CHALLENGER_GRID
from svmstream.solvers.online.race.promotion import Promotion

log = logging.getLogger("svmstream.challengers")

#: Received examples per scoring cell (the grid of predictions, promotions and drift challengers):
#: the race's challenger grid (:mod:`svmstream.solvers.online.race.grid`).
CELL = CHALLENGER_GRID
#: Promotions, retirements and drops a model's history keeps (the newest).
HISTORY_MAX = 100
#: Prefix of the challenger arrays inside the champion's saved state.
PREFIX = "challengers."
#: Settings a challenger may not change: they are the model's, not a learner's.
MODEL_FIELDS = ("task", "algorithm", "classes", "max_classes", "n_features")


@dataclass(frozen=True)
class Policy:
    """How challengers are tested and kept (the service's settings, ``app/settings.py``)."""

    max_challengers: int = 4
    alpha: float = 0.05
    min_examples: int = 500
    drift_horizon: int = 20_000
    window: int = 1000
    #: the size bound of the champion and its challengers together (None: not checked)
    max_model_bytes: int | None = None
    #: how drift challengers start: "both", "warm" (a copy of the champion, StreamingClassifier.warm_copy) or "fresh"
    drift_start: str = "warm"

    @classmethod
    def from_settings(cls, settings) -> Policy:
        """The policy of :class:`~svmstream.app.settings.Settings` ``settings``."""
        return cls(
            max_challengers=settings.max_challengers,
            alpha=settings.promotion_alpha,
            min_examples=settings.promotion_min_examples,
            drift_horizon=settings.drift_challenger_horizon,
            window=settings.challenger_window,
            max_model_bytes=settings.max_model_bytes,
            drift_start=settings.drift_challenger_start,
        )


@dataclass
class Challenger:
    """One challenger: its settings (what differs from the champion's configuration), full
    configuration, origin (``"user"``: named in ``PUT /models``; ``"drift"``: started by a
    drift detection), where it started, its estimator (None before its first rows, or while
    its model is parked) and its evidence against the champion."""

    config: ModelConfig
    settings: dict[str, Any]
    origin: str
    started_at: int
    evidence: PairedEvidence
    estimator: Any | None = None
    seen: int = 0
    drift_number: int | None = None
    #: examples the model received before the estimator's own count begins (None: ``started_at``,
    #: a fresh estimator; a warm-started one counts what the champion it copied counted)
    offset: int | None = None

    @property
    def start(self) -> str | None:
        """How a drift challenger started: ``"warm"`` (a copy of the champion) or ``"fresh"``;
        None for a user's challenger."""
        if self.origin != "drift":
            return None
        return "fresh" if self.offset is None else "warm"

    @property
    def received_before(self) -> int:
        """Examples the model received that this challenger's estimator does not count."""
        return self.started_at if self.offset is None else self.offset

    def ensure_estimator(self):
        """The challenger's estimator, a fresh one (its configuration's) if it has none yet."""
        if self.estimator is None:
            self.estimator = make_estimator(self.config)
        return self.estimator


def challenger_config(champion: ModelConfig, settings: dict[str, Any]) -> ModelConfig:
    """The configuration of a challenger: the champion's with ``settings`` (JSON names) applied.

    Raises
    ------
    ValueError
        A field of the model itself (:data:`MODEL_FIELDS`), or pydantic's ValidationError.
    """
    fixed = sorted(set(settings) & set(MODEL_FIELDS))
    if fixed:
        raise ValueError(f"{fixed[0]} is the model's, the same for every challenger")
    return ModelConfig.model_validate(
        {**champion.to_json(), "selection": False, "selection_bytes": None, **settings}
    )


def drift_config(champion: ModelConfig, leader: dict[str, Any] | None = None) -> ModelConfig:
    """The configuration of a drift challenger: the champion's with no shuffle buffer; a
    selection champion's with its race's winner (``leader``: numeric ``gamma`` and
    ``rehearsal``, as the selector's ``settings_``) as a plain pipeline."""
    if not champion.selection:
        return champion.model_copy(update={"shuffle_buffer": 0})
    update = {"selection": False, "selection_bytes": None, "shuffle_buffer": 0}
    if leader is not None:
        update.update(gamma=float(leader["gamma"]), rehearsal=int(leader["rehearsal"]))
    return ModelConfig.model_validate({**champion.to_json(), **update})


def differences(champion: ModelConfig, config: ModelConfig) -> dict[str, Any]:
    """The JSON fields where ``config`` differs from ``champion``."""
    a, b = champion.to_json(), config.to_json()
    return {k: v for k, v in b.items() if a.get(k) != v}


@dataclass
class ChallengerSet:
    """The challengers of one model and their bookkeeping (learner thread only, except
    :meth:`info`, which reads counters).  See the module docstring."""

    policy: Policy
    entries: list[Challenger] = field(default_factory=list)
    position: int = 0
    held_X: Any = None
    held_y: np.ndarray | None = None
    held_w: np.ndarray | None = None  # the held rows' importance weights (None: ones)
    spawn_at: int | None = None
    drift_started: int = 0
    #: the received labels' one-class runs (pairs inside an improbable run are not counted)
    runs: LabelRuns = field(default_factory=LabelRuns)
    detections_seen: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    promotions: int = 0
    parked: bool = False
    held_saved: int = 0  # a parked set's held rows, as saved
    champion_start: int = 0  # the position where the champion started learning
    #: the champion's configuration (the model's; set by the handle, changed by a promotion)
    champion_config: ModelConfig | None = None

    # ------------------------------------------------------------------ building
    @classmethod
    def for_model(
        cls, config: ModelConfig, specs: list[dict[str, Any]], policy: Policy
    ) -> ChallengerSet | None:
        """The set of a new model: its user challengers (``specs``: settings each), or an empty
        set when ``on_drift="challenger"``; None when the model has neither.

        Raises ValueError naming ``challengers[i].field`` (pydantic's message) or the count."""
        if len(specs) > policy.max_challengers:
            raise ValueError(
                f"at most {policy.max_challengers} challengers (max_challengers), got {len(specs)}"
            )
        entries = []
        for i, spec in enumerate(specs):
            try:
                cfg = challenger_config(config, spec)
            except Exception as exc:
                raise ValueError(f"challengers[{i}]: {_message(exc)}") from None
            entries.append(
                Challenger(cfg, differences(config, cfg), "user", 0, PairedEvidence(policy.window))
            )
        if not entries and config.on_drift != "challenger":
            return None
        return cls(policy, entries)

    def may_spawn(self, champion: ModelConfig | None = None) -> bool:
        """Whether a drift detection of the champion (``champion``: default the set's) starts a
        challenger: ``on_drift="challenger"``, a free slot and no drift challenger running."""
        champion = champion or self.champion_config
        return (
            champion is not None
            and champion.on_drift == "challenger"
            and len(self.entries) < self.policy.max_challengers
            and not any(e.origin == "drift" for e in self.entries)
        )

    def counted_configs(self, champion: ModelConfig | None = None) -> list[ModelConfig]:
        """The configurations whose bytes count beside the champion's in the model's size bounds
        (``max_model_bytes``, ``max_total_model_bytes``): every running challenger's (a user's
        or a drift one).  No slot is reserved for a drift challenger that may start (every
        service model has ``on_drift="challenger"`` by default): it starts only if it fits
        ``max_model_bytes`` then (:class:`~svmstream.app.models.contest.Contest`)."""
        return [e.config for e in self.entries]

    def race(self, champion=None, *, position: int | None = None, excluded=None) -> Race:
        """The race of ``champion`` (``models[0]``) and the challengers' estimators on the
        challenger grid (:data:`CELL`), decided by promotion by the sequential test
        (:class:`~svmstream.solvers.online.race.promotion.Promotion`: each challenger's evidence
        at its level, ``min_examples``; ``excluded``: challengers that may not be promoted now);
        at ``position`` (default: the set's)."""
        rule = Promotion([e.evidence for e in self.entries], [self.alpha_of(e) for e in self.entries],
                         self.policy.min_examples, excluded)  # fmt: skip
        models = [champion, *(e.estimator for e in self.entries)]
        return Race(models, grid=CELL, rule=rule, position=self.position if position is None else position)

    def alpha_of(self, entry: Challenger) -> float:
        """The level ``entry`` is tested at (:func:`~.evidence.challenger_alpha`)."""
        return challenger_alpha(self.policy.alpha, 0, self.policy.max_challengers, entry.drift_number)

    def n_held(self) -> int:
        """Rows held for the open scoring cell (a parked set: as saved)."""
        return self.held_saved if self.parked else n_rows(self.held_X)

    def record(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append an event to the history (the newest :data:`HISTORY_MAX` are kept)."""
        entry = {"event": event, "at": fields.pop("at", self.position), "time": time.time(), **fields}
        self.history.append(entry)
        del self.history[:-HISTORY_MAX]
        return entry

    def remove(self, index: int, event: str, **fields: Any) -> Challenger:
        """Remove challenger ``index`` (IndexError if there is none) and record ``event``."""
        entry = self.entries.pop(index)
        self.record(event, challenger=index, settings=entry.settings, origin=entry.origin,
                    evidence=self.evidence_of(entry), **fields)  # fmt: skip
        return entry

    def evidence_of(self, entry: Challenger) -> dict[str, Any]:
        """The test's figures for one challenger (JSON)."""
        ev = entry.evidence
        log_e = ev.log_e_value()
        alpha = self.alpha_of(entry)
        champ, chall, pairs = ev.window_accuracies()
        scaled = {}  # continuous losses (a regressor's): their scale and the window's mean losses
        if ev.scale is not None:
            scaled = dict(
                zip(("champion_window_loss", "window_loss"), ev.window_losses()), loss_scale=ev.scale
            )
        return {
            "paired_examples": ev.n,
            "wins": ev.wins,
            "losses": ev.losses,
            "log_e_value": log_e,
            "e_value": float(np.exp(min(log_e, 700.0))),
            "threshold": 1.0 / alpha,
            "alpha": alpha,
            "min_examples": self.policy.min_examples,
            "window_pairs": pairs,
            "window_accuracy": chall,
            "champion_window_accuracy": champ,
            **scaled,
        }

    # ------------------------------------------------------------------ description
    def info(self) -> dict[str, Any]:
        """``GET /models/{name}``'s ``challengers`` and ``promotion`` parts (JSON)."""
        listed = []
        for i, entry in enumerate(self.entries):
            listed.append({
                "index": i,
                "origin": entry.origin,
                "settings": entry.settings,
                "config": entry.config.to_json(),
                "started_at": entry.started_at,
                "start": entry.start,
                "examples_seen": entry.seen,
                **self.evidence_of(entry),
            })  # fmt: skip
        return {
            "challengers": listed,
            "promotion": {
                "test": "sequential paired test on prequential losses: 0/1, or absolute errors / loss_scale "
                "clipped to [-1, 1] (betting e-process, Ville's inequality)",
                "alpha": self.policy.alpha,
                "min_examples": self.policy.min_examples,
                "max_challengers": self.policy.max_challengers,
                "cell": CELL,
                "position": self.position,
                "held": self.n_held(),
                "promotions": self.promotions,
                "history": list(self.history),
            },
        }

    def adjust_stats(self, stats: dict[str, Any]) -> dict[str, Any]:
        """The champion's figures as the model's: the held rows counted as received and
        pending, and the examples received before the champion started (a promoted drift
        challenger) as received and learned -- the champion of the time learned them."""
        held, before = self.n_held(), self.champion_start
        if not held and not before:
            return stats
        stats = dict(stats)
        examples = dict(stats.get("examples") or {"received": 0, "learned": 0, "pending": 0})
        examples["received"] += held + before
        examples["learned"] += before
        examples["pending"] += held
        stats["examples"] = examples
        stats["n_seen"] = int(stats.get("n_seen", 0)) + held + before
        stats["pending"] = int(stats.get("pending", 0)) + held
        return stats

    # ------------------------------------------------------------------ persistence
    def attach(self, state: tuple[dict, dict] | None) -> tuple[dict, dict]:
        """The champion's state (or None: not learned yet) with this set inside: arrays under
        :data:`PREFIX`, the rest in ``meta["challengers"]``.  Arrays are copies."""
        arrays, meta = state if state is not None else ({}, {"estimator": None})
        arrays, meta = dict(arrays), dict(meta)
        entries = []
        for i, entry in enumerate(self.entries):
            sub = None
            if fitted(entry.estimator):
                sub_arrays, sub = entry.estimator.get_state()
                arrays.update({f"{PREFIX}{i}.{k}": np.array(v, copy=True) for k, v in sub_arrays.items()})
            entries.append({
                "config": entry.config.to_json(), "settings": entry.settings, "origin": entry.origin,
                "started_at": entry.started_at, "seen": entry.seen, "drift_number": entry.drift_number,
                "offset": entry.offset,
                "evidence": entry.evidence.to_json(), "state": jsonable(sub),
            })  # fmt: skip
        arrays.update(rows_state(f"{PREFIX}held.", self.held_X))
        if self.held_y is not None:
            arrays[f"{PREFIX}held.y"] = np.array(self.held_y)  # class indices (int64) or targets (float64)
        if self.held_w is not None:
            arrays[f"{PREFIX}held.w"] = np.array(self.held_w, dtype=np.float64)
        meta["challengers"] = {
            "entries": entries, "position": self.position, "spawn_at": self.spawn_at,
            "drift_started": self.drift_started, "detections_seen": self.detections_seen,
            "history": jsonable(self.history), "promotions": self.promotions, "held": self.n_held(),
            "champion_start": self.champion_start, "runs": self.runs.to_json(),
        }  # fmt: skip
        return arrays, meta

    @classmethod
    def restore(
        cls, saved: dict[str, Any], arrays: dict[str, np.ndarray] | None, policy: Policy
    ) -> ChallengerSet:
        """The set :meth:`attach` saved (``arrays`` None: from a header only, the estimators
        and held rows not decoded: a *parked* set that only describes itself)."""
        entries = []
        for i, data in enumerate(saved.get("entries", [])):
            est = None
            if arrays is not None and data.get("state") is not None:
                sub = {
                    k[len(f"{PREFIX}{i}.") :]: v for k, v in arrays.items() if k.startswith(f"{PREFIX}{i}.")
                }
                est = estimator_from_state(sub, data["state"])
            entries.append(Challenger(
                ModelConfig.model_validate(data["config"]), dict(data["settings"]), data["origin"],
                int(data["started_at"]), PairedEvidence.from_json(data["evidence"], policy.window),
                est, int(data.get("seen", 0)), data.get("drift_number"), data.get("offset"),
            ))  # fmt: skip
        out = cls(policy, entries, int(saved.get("position", 0)))
        out.spawn_at = saved.get("spawn_at")
        out.drift_started = int(saved.get("drift_started", 0))
        out.detections_seen = int(saved.get("detections_seen", 0))
        out.history = list(saved.get("history", []))
        out.promotions = int(saved.get("promotions", 0))
        out.champion_start = int(saved.get("champion_start", 0))
        out.runs = LabelRuns.from_json(saved.get("runs"))
        if arrays is None:
            out.parked, out.held_saved = True, int(saved.get("held", 0))
        else:
            out.held_X = rows_from_state(f"{PREFIX}held.", arrays)
            y = arrays.get(f"{PREFIX}held.y")
            out.held_y = None if y is None else np.array(y)
            w = arrays.get(f"{PREFIX}held.w")
            out.held_w = None if w is None else np.array(w, dtype=np.float64)
        return out

    def parked_copy(self) -> ChallengerSet:
        """This set without its estimators and held rows (what a parked model keeps)."""
        saved = self.attach(None)[1]["challengers"]
        out = ChallengerSet.restore(saved, None, self.policy)
        out.champion_config = self.champion_config
        return out


def split_state(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> tuple[dict, dict]:
    """The champion's own state from a state :meth:`ChallengerSet.attach` made (the same
    objects when it holds no challengers)."""
    if "challengers" not in meta:
        return arrays, meta
    meta = {k: v for k, v in meta.items() if k != "challengers"}
    return {k: v for k, v in arrays.items() if not k.startswith(PREFIX)}, meta


def _message(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        return f"{loc}: {err.get('msg')}" if loc else str(err.get("msg"))
    return str(exc)
