"""The one estimator factory: online models (``bsgd``, ``bsca``) from a :class:`ModelConfig`,
batch-job models (``dcsvm``, ``avsf``, ``liblinear-cd``) from a job's parameters.

Everything here talks to the solvers through their public API only: the estimators of
:mod:`svmstream.solvers`, their ``check_params()``, ``get_params``/``set_params`` and
``get_state``, and :func:`svmstream.solvers.persistence.estimator_from_state`.
"""

from __future__ import annotations

from typing import Any

from svmstream.app.models.config import BATCH_ALGORITHMS as ALGORITHMS
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.task_models import TASK_MODELS, refuse_foreign_settings
from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    DCSVMClassifier,
    LinearDualCDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)
from svmstream.solvers._hyperparameters import stage_params
from svmstream.solvers.online.selection import SelectionClassifier
from svmstream.solvers.persistence import estimator_from_state

#: The online estimator of each algorithm.
ONLINE_ESTIMATORS = {"bsgd": BudgetedSGDClassifier, "bsca": BudgetedSCAClassifier}


def routed_params(config: ModelConfig) -> dict[str, dict[str, Any]]:
    """``{stage: {name: value}}``: the hyperparameters of ``config`` routed to the stage of the
    streaming model that owns each (the table, :mod:`svmstream.solvers._hyperparameters`; every
    stage present, ``service`` included), without those ``config.algorithm`` does not take.  ``C``
    is 1.0 when it is null (``lambda`` given: the estimators ignore C then)."""
    routed = stage_params(config.model_dump(), config.algorithm)
    if routed["estimator"]["C"] is None:
        routed["estimator"]["C"] = 1.0
    return routed


def make_estimator(config: ModelConfig):
    """A fresh, unfitted model for ``config``: the streaming pipeline
    (:class:`svmstream.solvers.StreamingClassifier`: warm-up scaling, shuffle buffer and run
    guard, rehearsal, drift, calibration) around the plain estimator of ``algorithm``.

    ``algorithm="bsgd"`` wraps :class:`svmstream.solvers.BudgetedSGDClassifier` (or, with
    ``kernel="linear"``, :class:`svmstream.solvers.PegasosClassifier`); ``"bsca"``
    :class:`svmstream.solvers.BudgetedSCAClassifier`.  The keyword arguments come from
    :func:`routed_params`: the ``estimator`` stage's to the plain estimator, the scaler's,
    order's, rehearsal's and drift's to the pipeline.  The model always sees the labels as
    class indices ``0..K-1``; the service maps them to the model's JSON labels
    (:class:`svmstream.app.ingest.labels.LabelCodec`).

    Raises
    ------
    ValueError
        On an unknown algorithm, or ``kernel="linear"`` with ``algorithm="bsca"``.
    """
    if config.algorithm not in ONLINE_ESTIMATORS:
        raise ValueError(f"unknown algorithm {config.algorithm!r}")  # pragma: no cover
    task_model = TASK_MODELS.get(config.task)
    if task_model is not None:  # regression, novelty (app/models/task_models.py)
        refuse_foreign_settings(config)
        return task_model(config)
    if config.algorithm == "bsca" and config.kernel != "rbf":
        raise ValueError(
            f"kernel={config.kernel!r} is available for algorithm 'bsgd' only; 'bsca' learns "
            "budgeted RBF models (use algorithm 'bsgd' for a linear model)"
        )
    routed = routed_params(config)
    stages = {
        **routed["weights"],
        **routed["scaler"],
        **routed["order"],
        **routed["rehearsal"],
        **routed["drift"],
    }
    if isinstance(stages.get("class_weight"), dict):  # keyed by the user's labels: the service applies it
        stages["class_weight"] = None  # (svmstream.app.ingest.weights.class_weights; the model sees indices)
    if stages.get("on_drift") == "challenger":  # the service starts the challenger: the estimator reports
        stages["on_drift"] = "none"
    if config.selection:
        return _selection(routed["estimator"], stages, config.selection_bytes)
    return StreamingClassifier(_plain_estimator(config.algorithm, routed["estimator"]), **stages)


def _selection(params: dict[str, Any], stages: dict[str, Any], max_bytes: int | None) -> SelectionClassifier:
    """The model of ``selection``: candidates racing γ (a factor of "scale") and rehearsal
    (``docs/selection.md``), each with the model's other settings; ``rehearsal`` is each
    candidate's after its early rehearsal."""
    params = {k: v for k, v in params.items() if k not in ("gamma", "kernel")}
    own = {k: stages.pop(k) for k in ("warmup", "shuffle_buffer", "rehearsal")}
    return SelectionClassifier(
        _plain_estimator("bsgd", params), **own, pipeline_params=stages, max_bytes=max_bytes
    )


def _plain_estimator(algorithm: str, params: dict[str, Any]):
    """The paper's algorithm with the user's settings; ``kernel="linear"`` is Pegasos, which
    takes no kernel-model setting (budget, gamma, maintenance, ...: they do not apply)."""
    params = dict(params)
    cls = PegasosClassifier if params.pop("kernel", "rbf") == "linear" else ONLINE_ESTIMATORS[algorithm]
    accepted = cls().get_params()
    return cls(**{name: value for name, value in params.items() if name in accepted})


def check_config(config: ModelConfig) -> None:
    """Let the estimator validate the hyperparameters before a model is created.

    Raises
    ------
    ValueError
        With the estimator's message, e.g. ``budget must be an integer >= 2, got 1``.
    """
    make_estimator(config).check_params()


def copy_estimator(est):
    """An independent copy with identical predictions (through the persistence API)."""
    arrays, meta = est.get_state()
    return estimator_from_state(arrays, meta)


def make_job_estimator(
    algorithm: str,
    params: dict[str, Any] | None = None,
    early_level: int | None = None,
    *,
    default_n_jobs: int | None = None,
):
    """The unfitted estimator of a job, with its parameters validated.

    Parameters
    ----------
    algorithm : {"dcsvm", "avsf", "liblinear-cd"}
    params : dict
        Constructor parameters of :class:`svmstream.solvers.DCSVMClassifier`
        (``C``, ``gamma``, ``kernel``, ``tol``, ``cache_size``, ``n_levels``, ``n_jobs`` ...)
        or of :class:`svmstream.solvers.LinearDualCDClassifier` (``C``, ``tol``,
        ``max_iter``, ``random_state``; ``selection`` comes from ``algorithm``).
        ``probability`` defaults to True here (the estimators' default is False): job models
        serve calibrated probabilities, fitted on a held-out 10% of the training rows.
    early_level : int, optional
        DC-SVM only: serve the early-prediction model of this level.
    default_n_jobs : int, optional
        DC-SVM ``n_jobs`` when ``params`` does not give it.

    Returns
    -------
    estimator

    Raises
    ------
    ValueError
        Unknown algorithm, unknown parameter name, invalid value, or ``early_level`` for a
        linear algorithm.
    """
    params = dict(params or {})
    # job models serve probabilities: calibrated on a held-out split unless the job opts out
    params.setdefault("probability", True)
    if algorithm == "dcsvm":
        if early_level is not None:
            if params.get("early_level") not in (None, early_level):
                raise ValueError("early_level is given twice with different values (field and params)")
            params["early_level"] = early_level
        params.setdefault("n_jobs", default_n_jobs)
        est = DCSVMClassifier()
    elif algorithm in ("avsf", "liblinear-cd"):
        if early_level is not None or params.get("early_level") is not None:
            raise ValueError(f"early_level applies to dcsvm only, not {algorithm}")
        params.pop("early_level", None)
        if "selection" in params:
            raise ValueError(f"params.selection: set by the algorithm ({algorithm})")
        est = LinearDualCDClassifier(selection="avsf" if algorithm == "avsf" else "uniform")
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    valid = est.get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(unknown)} for {algorithm}; valid: {', '.join(sorted(valid))}"
        )
    for key, value in params.items():
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise ValueError(f"params.{key}: must be a number, string, boolean or null")
    est.set_params(**params)
    return est.check_params()
