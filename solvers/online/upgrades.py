"""Upgrades of the streaming pipeline's saved states (registered with
:func:`svmstream.solvers.persistence.register_upgrade`; applied in this order).

* :func:`legacy_state` — a budgeted estimator that carried every stage (state version ≤ 6 under
  the names ``BudgetedSGDClassifier``/``BudgetedSCAClassifier``) → a pipeline of version 0;
* :func:`stages_out_of_the_engine` — versions 0 and 1: the rehearsal, drift and calibration
  stages' metas move from the engine's under ``stages`` (version 2);
* :func:`scaler_and_order_out_of_the_engine` — versions 0 to 2: the engine's preprocessing
  (window, scaling, γ, buffer, guard, and the generator they drew from) becomes the scaler and
  order stages' metas (version 3).  Their arrays keep their names (``pp_*``);
* :func:`engines_renamed` — an engine's state (``StreamingBSGD``, ``StreamingBSCA``: the
  classes before each algorithm became one class) as the plain estimator's it is:
  ``BudgetedSGDClassifier``, ``PegasosClassifier`` (``kernel="linear"``) or
  ``BudgetedSCAClassifier``, with the parameters that class takes.

Only metas change; the arrays are read under the names they were saved with.
"""

from __future__ import annotations

from .._params import DEFAULT_REHEARSAL_MEMORY, DEFAULT_SHUFFLE_BUFFER, DEFAULT_WARMUP
from ..budgeted import BudgetedSCAClassifier, BudgetedSGDClassifier, PegasosClassifier
from ..budgeted._base import LEGACY_STAGE_PARAMS
from ..persistence import register_upgrade
from .stages import RehearsalStage

#: The settings of the stages that left the engines first (states of version 0 saved them there).
MOVED = ("on_drift", "rehearsal", "rehearsal_memory")
#: The engines' defaults of the scaler's and order stage's settings (states that omit one).
_ENGINE_DEFAULTS = {
    "scaling": "auto",
    "warmup": DEFAULT_WARMUP,
    "shuffle_buffer": DEFAULT_SHUFFLE_BUFFER,
    "run_guard": True,
}


@register_upgrade
def legacy_state(meta):
    """A state saved by a budgeted estimator that still carried the stages (state version
    ≤ 6 under the names ``BudgetedSGDClassifier``/``BudgetedSCAClassifier``) as the meta of a
    ``StreamingClassifier`` around its engine (its ``on_drift``: as saved, ``"none"`` for states
    saved before drift handling); any other meta unchanged."""
    engines = {"BudgetedSGDClassifier": "StreamingBSGD", "BudgetedSCAClassifier": "StreamingBSCA"}
    if meta.get("estimator") not in engines or int(meta.get("state_version", 0)) > 6:
        return meta
    params = meta.get("params", {})
    stages = {name: params[name] for name in LEGACY_STAGE_PARAMS if name in params}
    stages["on_drift"] = params.get("on_drift", "none") if int(meta.get("state_version", 0)) > 4 else "none"
    stages["rehearsal"] = params.get("rehearsal", 0)  # saved before rehearsal existed: off
    stages["rehearsal_memory"] = params.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY)
    return {
        "estimator": "StreamingClassifier",
        "state_version": 0,
        "params": stages,
        "model": {**meta, "estimator": engines[meta["estimator"]]},
    }


@register_upgrade
def stages_out_of_the_engine(meta):
    """A ``StreamingClassifier`` state of version 0 or 1, whose engine saved the rehearsal
    memories, the drift monitor and the calibrator (``model["rehearsal"]``, each binary
    model's ``"rehearsal"`` and settings, ``model["drift"]``, ``model["calibration"]``; arrays
    ``reh_*``, ``ovr{k}__reh_*``, ``drift__*``, ``cal__*`` — the names the stages use) and the
    pending-reset flag (in its counters): the metas move under ``stages``, the flag is read
    from the counters on loading; any other meta unchanged."""
    if meta.get("estimator") != "StreamingClassifier" or int(meta.get("state_version", 0)) > 1:
        return meta
    model = dict(meta["model"])
    drift = model.pop("drift", None)
    stages = {
        "rehearsal": {"memory": model.pop("rehearsal", None), "children": []},
        "drift": None if drift is None else {"monitor": drift, "pending": False},
        "calibration": model.pop("calibration", None),
        "reset_flag_in_counters": True,
    }
    if model.get("ovr"):  # one-vs-rest: each binary model's memory and settings
        model["ovr"] = [None if sub is None else dict(sub) for sub in model["ovr"]]
        for sub in model["ovr"]:
            if sub is None:
                stages["rehearsal"]["children"].append(None)
                continue
            sub_params = sub["params"]
            stages["rehearsal"]["children"].append(
                {
                    "rehearsal": sub_params.get("rehearsal", 0),
                    "rehearsal_memory": sub_params.get("rehearsal_memory", DEFAULT_REHEARSAL_MEMORY),
                    "seed": RehearsalStage.seed_of(sub_params.get("random_state")),
                    "memory": sub.pop("rehearsal", None),
                }
            )
    return {**meta, "model": model, "stages": stages}


def _engine_stage_params(model):
    """The scaler's and order stage's settings an engine state held, as its ``from_state``
    applied them (version 2: raw features, no buffer; version 3: no run guard)."""
    params = {**_ENGINE_DEFAULTS, **{k: v for k, v in model["params"].items() if k in LEGACY_STAGE_PARAMS}}
    version = int(model.get("state_version", 7))
    if version == 2:
        params.update(scaling="none", warmup=0, shuffle_buffer=0, run_guard=False)
    if version == 3:
        params["run_guard"] = False
    return params


@register_upgrade
def scaler_and_order_out_of_the_engine(meta):
    """A ``StreamingClassifier`` state of version 0 to 2, whose engine ran the warm-up window,
    scaler, shuffle buffer and run guard (``model["preprocessing"]``, the engine's
    ``rng_state``, arrays ``pp_*``), as the meta of version 3: ``stages.scaler`` and
    ``stages.order`` (the order stage draws on from the engine's generator state); a state of
    version 0 takes the pipeline's settings from its engine's.  Any other meta unchanged."""
    if meta.get("estimator") != "StreamingClassifier" or int(meta.get("state_version", 0)) > 2:
        return meta
    model = meta["model"]
    engine = _engine_stage_params(model)
    params = dict(meta["params"])
    if int(meta.get("state_version", 0)) == 0:  # saved by an engine: its own settings, as they were
        params = {**engine, **{name: meta["params"][name] for name in MOVED if name in meta["params"]}}
    pp = model.get("preprocessing")
    linear = model["params"].get("kernel", "rbf") == "linear"
    if pp is None:  # version 2: raw features, γ as given
        pp = {"ready": True, "kind": "none", "gamma": None if linear else float(model["params"]["gamma"])}
        pp.update(warmup=0, needs_window=False, buffer_capacity=0, run_guard=False, guard_capacity=0)
    sparse_rows = bool(pp.get("sparse_rows", False))
    scaler = {
        "scaling": engine["scaling"],
        "ready": pp["ready"],
        "kind": pp["kind"],
        "gamma": pp["gamma"],
        "has_gamma": not linear,
        "warmup": pp["warmup"],
        "needs_window": pp["needs_window"],
        "keep_sparse": linear or sparse_rows,
        "text_like": linear,
    }
    order = {
        "shuffle_buffer": int(engine["shuffle_buffer"]),
        "buffer_capacity": int(pp["buffer_capacity"]),
        "run_guard": bool(pp.get("run_guard", False)),
        "guard_capacity": int(pp.get("guard_capacity", 0)),
        "rows": pp.get("rows") if (linear or sparse_rows) else "dense",
        "sparse_rows": sparse_rows,
        "decide_rows": linear,
        "row_nnz": pp.get("row_nnz"),
        "rng_state": model["rng_state"],
    }
    stages = {**meta.get("stages", {}), "scaler": scaler, "order": order}
    return {**meta, "state_version": 3, "params": params, "stages": stages}


#: The stages' settings a plain estimator's saved state may hold (off).
_STAGES_OFF = {"scaling": "none", "warmup": 0, "shuffle_buffer": 0, "run_guard": False}
_PLAIN = {cls.__name__: cls for cls in (BudgetedSGDClassifier, BudgetedSCAClassifier, PegasosClassifier)}


def _as_plain(meta):
    """An engine's meta (and its one-vs-rest models' metas) as its plain estimator's."""
    params = meta.get("params", {})
    if meta["estimator"] == "StreamingBSCA":
        cls = BudgetedSCAClassifier
    else:
        cls = PegasosClassifier if params.get("kernel", "rbf") == "linear" else BudgetedSGDClassifier
    names = cls().get_params()
    out = {**meta, "estimator": cls.__name__, "params": {k: v for k, v in params.items() if k in names}}
    if out.get("ovr"):
        out["ovr"] = [None if sub is None else _as_plain(sub) for sub in out["ovr"]]
    return out


@register_upgrade
def engines_renamed(meta):
    """The state of an engine named ``StreamingBSGD``/``StreamingBSCA`` (inside a
    ``StreamingClassifier``'s ``model``, or saved alone) as its plain estimator's (the settings
    the engine kept of the stages that left it are dropped, as the engine dropped them);
    a plain estimator's own state (version 7 or 8) whose stages' settings are not off raises
    ValueError (it belongs to a streaming pipeline).  Any other meta unchanged."""
    name = meta.get("estimator")
    if name in ("StreamingBSGD", "StreamingBSCA"):
        return _as_plain(meta)
    if name in _PLAIN and int(meta.get("state_version", 0)) > 6:
        for key, off in _STAGES_OFF.items():
            if key in meta.get("params", {}) and meta["params"][key] != off:
                raise ValueError(f"a {name} has no {key}; load this state as a StreamingClassifier")
    return meta
