"""What a model is, in one line (``GET /models/{name}``'s ``kind``, the start-up log, the
dashboard), and its race as the dashboard shows it.

``kind`` reads the model's configuration and the published statistics only (the race of a
selection model is ``statistics["selection"]``, :meth:`SelectionClassifier.race`):

* ``"selection of 4 candidates (warm-up window open: 3 of 1,000 examples)"``;
* ``"selection of 4 candidates, 2 racing, leader 1 × scale (C = 1)"``;
* ``"selection won by 4 × scale (C = 1) over 4 candidates"``;
* ``"BSGD pipeline, gss merging, budget 500"``, ``"BSCA pipeline, lookup-wd merging, budget 200"``,
  ``"linear BSGD pipeline (weight vector, no budget)"``;
* ``"ε-SVR regression: BSCA pipeline, lookup-wd merging, budget 500"``,
  ``"ε-SVR regression: selection of 2 candidates, 2 racing, leader 1 × scale"``,
  ``"ν one-class SVM novelty: BSGD pipeline, lookup-wd merging, budget 500"``;
* ``"DC-SVM batch model"``, ``"AVSF batch model"``, ``"LIBLINEAR dual CD batch model"``.
"""

from __future__ import annotations

from typing import Any

_BATCH_NAMES = {"dcsvm": "DC-SVM", "avsf": "AVSF", "liblinear-cd": "LIBLINEAR dual CD"}
#: How a model of each task is named before its pipeline (docs/regression.md, docs/novelty.md).
_TASK_NAMES = {
    "classification": "",
    "regression": "ε-SVR regression: ",
    "novelty": "ν one-class SVM novelty: ",
}
#: The default candidates of each task's selector, shown before its window closes
#: (``DEFAULT_CANDIDATES`` less the window candidate; ``DEFAULT_REGRESSION_CANDIDATES``).
_RACE_CANDIDATES = {"classification": 4, "regression": 2}


def race_of(stats: dict[str, Any]) -> dict[str, Any] | None:
    """The race of a selection model (:meth:`SelectionClassifier.race`), or None."""
    race = (stats.get("statistics") or {}).get("selection")
    return race if isinstance(race, dict) else None


def _candidate_text(candidate: dict[str, Any]) -> str:
    settings = candidate.get("settings") or {}
    factor = settings.get("gamma_factor")
    gamma = f"{factor:g} × scale" if factor is not None else f"γ = {settings.get('gamma')}"
    c = settings.get("C")
    solver = ", BSCA" if settings.get("solver") == "bsca" else ""
    return gamma if c is None else f"{gamma} (C = {c:g}{solver})"


def _selection_kind(race: dict[str, Any] | None, config: Any) -> str:
    if race is None or not race.get("candidates"):
        window = (race or {}).get("window") or {}
        held = f"{window['held']:,} of " if "held" in window else ""
        return (
            f"selection of {_RACE_CANDIDATES[config.task]} candidates (warm-up window open: {held}"
            f"{config.warmup:,} examples)"
        )
    # a window candidate that never started (the stream outgrew the window) is not counted
    candidates = [
        c
        for c in race["candidates"]
        if c.get("racing") or c.get("learned") or not c["settings"].get("window")
    ]
    racing = sum(1 for c in candidates if c.get("racing"))
    leader = race.get("leader")
    if leader is None:
        return f"selection of {len(candidates)} candidates"
    text = _candidate_text(race["candidates"][leader])
    if racing <= 1:
        return f"selection won by {text} over {len(candidates)} candidates"
    return f"selection of {len(candidates)} candidates, {racing} racing, leader {text}"


def model_kind(config: Any, stats: dict[str, Any]) -> str:
    """One line saying what the model is (see the module's examples).

    ``config``: a :class:`~svmstream.app.models.config.ModelConfig`; ``stats``: the published
    :func:`~svmstream.app.models.view.estimator_stats` (``{}`` before the first batch).
    """
    algorithm = config.algorithm
    if algorithm in _BATCH_NAMES:
        return f"{_BATCH_NAMES[algorithm]} batch model"
    if getattr(config, "selection", False):
        return f"{_TASK_NAMES[config.task]}{_selection_kind(race_of(stats), config)}"
    if getattr(config, "kernel", "rbf") == "linear":
        return f"linear {algorithm.upper()} pipeline (weight vector, no budget)"
    maintenance = config.maintenance
    how = f"{config.merge_solver} merging" if maintenance == "merge" else f"{maintenance} maintenance"
    return f"{_TASK_NAMES[config.task]}{algorithm.upper()} pipeline, {how}, budget {config.budget:,}"


def race_figures(stats: dict[str, Any]) -> dict[str, Any] | None:
    """The race panel of the dashboard: ``candidates`` (``label``, ``racing``, ``learned``,
    ``recent_accuracy``, ``segment_accuracy``), ``leader`` (index or None), ``rungs`` (as the
    selector records them) and ``evidence`` (the leader test while several race); None for a
    model that does not race."""
    race = race_of(stats)
    if race is None:
        return None
    return {
        "candidates": [
            {
                "label": _candidate_text(c),
                "racing": bool(c.get("racing")),
                "learned": c.get("learned"),
                "recent_accuracy": c.get("recent_accuracy"),
                "segment_accuracy": c.get("segment_accuracy"),
                "recent_mse": c.get("recent_mse"),  # a regression race's
            }
            for c in race.get("candidates", [])
        ],
        "leader": race.get("leader"),
        "leader_rule": race.get("leader_rule"),
        "rungs": list(race.get("rungs") or []),
        "evidence": race.get("leader_test"),
        "window": race.get("window"),
    }
