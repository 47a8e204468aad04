"""The estimators of the tasks beyond classification (issue 38): a :class:`ModelConfig` of task
``regression`` or ``novelty`` -> its streaming pipeline (:mod:`svmstream.solvers.online.tasks`)
around the plain budgeted estimator of its algorithm.

Chosen once by :data:`TASK_MODELS` (keyed by ``config.task``); the service then talks to the model
through the contract only (its ``TASK``, ``HAS_CLASSES``, ``report()``).  The settings a task takes
are :data:`~svmstream.solvers._hyperparameters.TASK_SETTINGS`; any other one given with a value
other than the task's default is refused naming it (a setting means what it says).
"""

from __future__ import annotations

from typing import Any

from svmstream.app.errors import InvalidInput
from svmstream.solvers import (
    BudgetedOneClassSVM,
    BudgetedSCARegressor,
    BudgetedSGDRegressor,
    SelectionRegressor,
    StreamingNovelty,
    StreamingRegressor,
)
from svmstream.solvers._hyperparameters import BY_NAME, TASK_DEFAULTS, TASK_SETTINGS

#: Values of a setting a task does not take that mean its default (the pipelines hold dense SVs;
#: the size guards resolve ``sv_storage="auto"`` of a dense batch to "dense").
#: A shuffle buffer of the table's default: a task model's configuration before its task default
#: was 0 (a snapshot of then); the pipelines have none either way.
SAME_AS_DEFAULT = {"sv_storage": ("auto", "dense"), "shuffle_buffer": (BY_NAME["shuffle_buffer"].default,)}
#: The task pipelines' scalings (the warm-up window's mean and std, or none).
TASK_SCALINGS = ("standard", "none")
#: What a task model does on a drift detection: count it, or start a drift challenger (the service's).
TASK_ON_DRIFT = ("none", "challenger")


def refuse_foreign_settings(config) -> None:
    """InvalidInput naming the first setting ``config`` holds that its task does not take (a
    value other than the task's or the table's default), or a scaling the pipeline lacks."""
    own = TASK_SETTINGS[config.task]
    defaults = TASK_DEFAULTS[config.task]
    for name, row in BY_NAME.items():
        if name in own:
            continue
        value = getattr(config, name)
        if value != defaults.get(row.json_name, row.default) and value not in SAME_AS_DEFAULT.get(name, ()):
            raise InvalidInput(
                f"{row.json_name}: does not apply to a {config.task} model (it takes "
                f"{', '.join(BY_NAME[k].json_name for k in own if k != 'task')})",
                field=row.json_name,
            )
    if config.on_drift not in TASK_ON_DRIFT:
        raise InvalidInput(
            f'on_drift: a {config.task} model counts its detections ("none") or starts a drift challenger '
            f'("challenger", docs/challengers.md); it has no schedule to reset, got {config.on_drift!r}',
            field="on_drift",
        )
    if config.scaling not in TASK_SCALINGS:
        raise InvalidInput(
            f"scaling: a {config.task} model scales by the warm-up window's mean and standard deviation "
            f'("standard") or not at all ("none"), got {config.scaling!r}',
            field="scaling",
        )


def _engine_params(config, cls, extra: dict[str, Any]) -> Any:
    values = {name: getattr(config, name) for name in ("budget", "gamma", "C", "lambda_", "n_samples",
              "random_state", "maintenance", "merge_solver", "schedule", "eta", "fit_intercept")}  # fmt: skip
    values.update({k: v for k, v in extra.items() if v is not None})
    accepted = cls().get_params()
    return cls(**{k: v for k, v in values.items() if k in accepted})


def _stages(config) -> dict[str, Any]:
    return {
        "warmup": config.warmup,
        "scaling": config.scaling,
        "rehearsal": config.rehearsal,
        "rehearsal_memory": config.rehearsal_memory,
        "random_state": config.random_state,
    }


def regressor(config) -> StreamingRegressor | SelectionRegressor:
    """The regression pipeline: BSCA's ε-SVR dual step (``bsca``, the default) or BSGD with the
    ε-insensitive loss (``bsgd``), the target standardised in the warm-up window; with
    ``selection`` (a model created with no settings) the race of such pipelines over γ
    (:class:`~svmstream.solvers.online.selection.SelectionRegressor`, docs/regression.md)."""
    if config.kernel != "rbf":
        raise InvalidInput("kernel: a regression model is a budgeted RBF model", field="kernel")
    cls = BudgetedSCARegressor if config.algorithm == "bsca" else BudgetedSGDRegressor
    engine = _engine_params(config, cls, {"epsilon": config.epsilon})
    stages = _stages(config)
    if config.selection:
        seed = stages.pop("random_state")
        return SelectionRegressor(
            engine, pipeline_params=stages, max_bytes=config.selection_bytes, random_state=seed
        )
    return StreamingRegressor(engine, **stages)


def novelty(config) -> StreamingNovelty:
    """The novelty pipeline: the budgeted ν one-class SVM (NORMA's step; ν = 0.2 unless given)
    and a threshold at a 5 % false-alarm rate of recent scores."""
    if config.algorithm != "bsgd":
        raise InvalidInput(
            "algorithm: a novelty model learns by BSGD (NORMA's one-class step); bsca has no one-class "
            "dual step",
            field="algorithm",
        )
    engine = _engine_params(config, BudgetedOneClassSVM, {"nu": 0.2 if config.nu is None else config.nu})
    return StreamingNovelty(engine, **_stages(config))


#: The estimator of each task beyond classification.
TASK_MODELS = {"regression": regressor, "novelty": novelty}
