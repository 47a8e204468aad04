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
from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    DCSVMClassifier,
    LinearDualCDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)
from svmstream.solvers.persistence import estimator_from_state


def make_estimator(config: ModelConfig):
    """A fresh, unfitted model for ``config``: the streaming pipeline
    (:class:`svmstream.solvers.StreamingClassifier`: warm-up scaling, shuffle buffer and run
    guard, rehearsal, drift, calibration) around the plain estimator of ``algorithm``.

    ``algorithm="bsgd"`` wraps :class:`svmstream.solvers.BudgetedSGDClassifier` (or, with
    ``kernel="linear"``, :class:`svmstream.solvers.PegasosClassifier`); ``"bsca"``
    :class:`svmstream.solvers.BudgetedSCAClassifier`.  The model always sees the labels as
    class indices ``0..K-1``; the service maps them to the model's JSON labels
    (:class:`svmstream.app.ingest.labels.LabelCodec`).

    Raises
    ------
    ValueError
        On an unknown algorithm, or ``kernel="linear"`` with ``algorithm="bsca"``.
    """
    return StreamingClassifier(
        _plain_estimator(config),
        scaling=config.scaling,
        warmup=config.warmup,
        shuffle_buffer=config.shuffle_buffer,
        run_guard=config.run_guard,
        rehearsal=config.rehearsal,
        rehearsal_memory=config.rehearsal_memory,
        on_drift=config.on_drift,
    )


def _plain_estimator(config: ModelConfig):
    """The paper's algorithm with the user's settings (no preprocessing of its own)."""
    C = config.C if config.C is not None else 1.0
    common = dict(C=C, lambda_=config.lambda_, n_samples=config.n_samples, random_state=config.random_state)
    schedule = dict(
        schedule=config.schedule, eta=config.eta, radius=config.radius, fit_intercept=config.fit_intercept
    )
    if config.algorithm == "bsgd" and config.kernel == "linear":
        return PegasosClassifier(**common, **schedule)
    kernel_model = dict(
        budget=config.budget,
        gamma=config.gamma,
        maintenance=config.maintenance,
        merge_solver=config.merge_solver,
        sv_storage=config.sv_storage,
        **common,
    )
    if config.algorithm == "bsgd":
        return BudgetedSGDClassifier(**kernel_model, **schedule)
    if config.algorithm == "bsca":
        if config.kernel != "rbf":
            raise ValueError(
                f"kernel={config.kernel!r} is available for algorithm 'bsgd' only; 'bsca' learns "
                "budgeted RBF models (use algorithm 'bsgd' for a linear model)"
            )
        return BudgetedSCAClassifier(**kernel_model)
    raise ValueError(f"unknown algorithm {config.algorithm!r}")  # pragma: no cover


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
