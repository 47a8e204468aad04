"""Model search jobs: scikit-learn's ``GridSearchCV`` over one of our estimators.

``POST /jobs`` with ``"algorithm": "search"`` (and ``svmstream search``) names an
``estimator`` (``bsgd``, ``bsca``, ``dcsvm``, ``avsf``, ``liblinear-cd``), a ``grid`` of
values per parameter and ``cv`` folds.  :func:`check_search` validates that on the server
(422 naming ``grid.<name>``, ``cv`` or ``estimator``); :func:`run_search` is the worker's
work: load the data, run ``GridSearchCV`` on ``StratifiedKFold(cv, shuffle=True,
random_state)`` folds (accuracy; refit on all rows), and return the best estimator with the
table of scores.  With a dask cluster the fits run through joblib's dask backend (the data
scattered to the workers once); otherwise in the worker process's joblib pool.

The best model becomes a servable model like any job's; for the online estimators (``bsgd``,
``bsca``) it is an online model that keeps learning through ``/learn``
(:func:`svmstream.app.jobs.supervisor.register_result`).  See ``docs/jobs.md``.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from svmstream.app.jobs.datasets import load_dataset, prepare_X
from svmstream.app.jobs.uploads import JobError
from svmstream.app.models.factory import make_estimator, make_job_estimator
from svmstream.solvers import (
    BudgetedSCAClassifier,
    BudgetedSGDClassifier,
    DCSVMClassifier,
    LinearDualCDClassifier,
    PegasosClassifier,
    StreamingClassifier,
)

if TYPE_CHECKING:
    from sklearn.model_selection import StratifiedKFold

ESTIMATORS = ("bsgd", "bsca", "dcsvm", "avsf", "liblinear-cd")
"""What a search job may tune."""

ONLINE = ("bsgd", "bsca")
"""Searched estimators whose best model keeps learning online afterwards."""

GRID_NAMES: dict[str, tuple[str, ...]] = {
    # JSON names; "lambda" is the estimators' lambda_.  Only hyperparameters a served model
    # keeps in its configuration (online) or the job summary (batch) are searchable.
    "bsgd": ("C", "gamma", "budget", "lambda", "eta"),
    "bsca": ("C", "gamma", "budget", "lambda"),
    "dcsvm": ("C", "gamma", "bias", "tol", "kernel", "degree", "coef0", "n_levels"),
    "avsf": ("C", "tol"),
    "liblinear-cd": ("C", "tol"),
}
"""The parameters a grid may name, per estimator."""

MAX_CANDIDATES = 256
"""Largest number of parameter combinations of one grid."""

MAX_VALUES = 64
"""Largest number of values of one parameter."""

CV_MIN, CV_MAX = 2, 10


def estimator_param(name: str, estimator: str = "") -> str:
    """The estimator's parameter for a grid's JSON name (``lambda`` -> ``lambda_``); an online
    model's hyperparameters belong to the plain estimator inside its streaming pipeline
    (``estimator__C``)."""
    param = "lambda_" if name == "lambda" else name
    return f"estimator__{param}" if estimator in ONLINE else param


def json_param(param: str) -> str:
    """A searched parameter's JSON name (the inverse of :func:`estimator_param`)."""
    name = param.removeprefix("estimator__")
    return "lambda" if name == "lambda_" else name


def flat_params(base) -> dict[str, Any]:
    """JSON-ready parameters of a search's base: an online model's plain estimator's and its
    stages' in one dict (``kernel: "linear"`` marks Pegasos), a batch estimator's own."""
    if not base.LEARNS_ONLINE:  # the contract's flag: a batch estimator's own parameters
        return base.get_params(deep=False)
    stages = {k: v for k, v in base.get_params(deep=False).items() if k != "estimator"}
    linear = {"kernel": "linear"} if isinstance(base.estimator, PegasosClassifier) else {}
    return {**base.estimator.get_params(), **stages, **linear}


def make_base(estimator: str, base_params: dict[str, Any]):
    """An unfitted estimator of kind ``estimator`` with ``base_params`` (:func:`flat_params`;
    online kinds: the streaming pipeline around the plain estimator, as the service makes it).

    Raises
    ------
    ValueError
        On an unknown estimator or parameter (``set_params``).
    """
    if estimator in ONLINE:
        params = dict(base_params)
        linear = params.pop("kernel", "rbf") == "linear"
        plain_cls = (
            PegasosClassifier
            if linear
            else {"bsgd": BudgetedSGDClassifier, "bsca": BudgetedSCAClassifier}[estimator]
        )
        accepted = plain_cls().get_params()
        plain = plain_cls(**{k: v for k, v in params.items() if k in accepted})
        return StreamingClassifier(plain, **{k: v for k, v in params.items() if k not in accepted})
    if estimator == "dcsvm":
        est = DCSVMClassifier()
    elif estimator in ("avsf", "liblinear-cd"):
        est = LinearDualCDClassifier(selection="avsf" if estimator == "avsf" else "uniform")
    else:
        raise ValueError(f"unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")
    return est.set_params(**base_params)


def check_search(estimator: str, grid: Any, cv: Any, base) -> dict[str, list]:
    """Validate a search request against the unfitted ``base`` estimator.

    Parameters
    ----------
    estimator : str
        One of :data:`ESTIMATORS`.
    grid : dict of str -> list
        Values per parameter (JSON names, :data:`GRID_NAMES`).
    cv : int
        Folds, :data:`CV_MIN` .. :data:`CV_MAX`.
    base : estimator
        What the candidates are made from (each value is checked by the estimator's
        ``check_params``).

    Returns
    -------
    dict
        The grid with estimator parameter names (``lambda`` -> ``lambda_``), values as given.

    Raises
    ------
    JobError
        422 naming ``estimator``, ``cv``, ``grid`` or ``grid.<name>``.
    """
    if estimator not in ESTIMATORS:
        raise JobError(
            f"estimator: unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}",
            field="estimator",
        )
    if isinstance(cv, bool) or not isinstance(cv, int) or not CV_MIN <= cv <= CV_MAX:
        raise JobError(f"cv: must be an integer from {CV_MIN} to {CV_MAX}, got {cv!r}", field="cv")
    if not isinstance(grid, dict) or not grid:
        raise JobError("grid: give at least one parameter with a list of values", field="grid")
    allowed = GRID_NAMES[estimator]
    out: dict[str, list] = {}
    for name, values in grid.items():
        where = f"grid.{name}"
        if name not in allowed:
            raise JobError(
                f"{where}: {estimator} has no searchable parameter {name!r}; use {', '.join(allowed)}",
                field=where,
            )
        if not isinstance(values, list) or not values:
            raise JobError(f"{where}: must be a non-empty list of values", field=where)
        if len(values) > MAX_VALUES:
            raise JobError(f"{where}: {len(values)} values; at most {MAX_VALUES}", field=where)
        param = estimator_param(name, estimator)
        for i, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise JobError(f"{where}[{i}]: must be a number or a string, got {value!r}", field=where)
            if isinstance(value, float) and not math.isfinite(value):
                raise JobError(f"{where}[{i}]: must be finite", field=where)
            try:
                base.set_params(**{param: value}).check_params()
            except (ValueError, TypeError) as exc:
                raise JobError(f"{where}[{i}]: {exc}", field=where) from None
        if len(set(map(repr, values))) != len(values):
            raise JobError(f"{where}: duplicate values", field=where)
        out[param] = list(values)
    n = math.prod(len(v) for v in out.values())
    if n > MAX_CANDIDATES:
        raise JobError(
            f"grid: {n} parameter combinations; at most {MAX_CANDIDATES}",
            field="grid",
        )
    return out


def prepare_search(
    estimator: Any,
    grid: Any,
    cv: Any,
    random_state: Any,
    params: dict[str, Any],
    *,
    resolve_config: Callable[[dict[str, Any]], Any],
    n_jobs: int | None = None,
) -> dict[str, Any]:
    """Validate a search and build what its worker needs.

    Parameters
    ----------
    estimator, grid, cv :
        See :func:`check_search`.
    random_state : int
        Seed of the folds, and of every candidate whose parameters give none.
    params : dict
        Fixed parameters of every candidate: model fields (JSON names, e.g. ``budget``)
        for ``bsgd``/``bsca``, estimator parameters for the batch estimators (as in a
        training job; DC-SVM gets ``n_jobs=1`` unless given: the search runs candidates in
        parallel already).
    resolve_config : callable(dict) -> ModelConfig
        Fills an online model's fields from the server's defaults (the registry's).
    n_jobs : int, optional
        joblib workers of a local search (None: joblib's default).

    Returns
    -------
    dict
        ``task`` (the worker's search fields: ``estimator``, ``grid`` with estimator names,
        ``cv``, ``random_state``, ``base_params``, ``n_jobs``) and ``record`` (the job's
        public ``search``).

    Raises
    ------
    JobError
        422 naming ``estimator``, ``cv``, ``random_state``, ``params``, ``grid`` or
        ``grid.<name>``.
    """
    if estimator not in ESTIMATORS:
        raise JobError(
            f"estimator: unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}",
            field="estimator",
        )
    if isinstance(random_state, bool) or not isinstance(random_state, int) or random_state < 0:
        raise JobError(f"random_state: must be an integer >= 0, got {random_state!r}", field="random_state")
    try:
        if estimator in ONLINE:
            base = make_estimator(resolve_config({**params, "algorithm": estimator}))
        else:
            fixed = dict(params)
            if estimator == "dcsvm":
                fixed.setdefault("n_jobs", 1)
            base = make_job_estimator(estimator, fixed, None)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise JobError(f"params: {exc}", field="params") from None
    base_params = flat_params(base)
    if "random_state" in base_params and base_params["random_state"] is None:
        base_params["random_state"] = random_state  # candidates comparable, results repeatable
    names = check_search(estimator, grid, cv, make_base(estimator, base_params))
    return {
        "task": {
            "estimator": estimator,
            "grid": names,
            "cv": int(cv),
            "random_state": int(random_state),
            "base_params": base_params,
            "n_jobs": n_jobs,
        },
        "record": {"estimator": estimator, "grid": grid, "cv": int(cv), "random_state": int(random_state)},
    }


def folds(cv: int, random_state: int) -> StratifiedKFold:
    """The folds of a search (shuffled, stratified, seeded: a plain ``GridSearchCV`` given
    the same object reproduces them)."""
    # imported here: the server only validates searches, their worker runs them (5.6 MB of
    # RSS and ~0.15 s of start-up for a module the server never uses)
    from sklearn.model_selection import StratifiedKFold

    return StratifiedKFold(n_splits=cv, shuffle=True, random_state=random_state)


def score_table(cv_results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per candidate: ``params`` (JSON names), mean/std test score, rank, per-fold
    scores and mean fit seconds; ordered by rank."""
    n = len(cv_results["params"])
    splits = sorted(k for k in cv_results if k.startswith("split") and k.endswith("_test_score"))
    rows = []
    for i in range(n):
        params = {json_param(k): v for k, v in cv_results["params"][i].items()}
        rows.append(
            {
                "params": params,
                "mean_test_score": float(cv_results["mean_test_score"][i]),
                "std_test_score": float(cv_results["std_test_score"][i]),
                "rank": int(cv_results["rank_test_score"][i]),
                "fold_scores": [float(cv_results[s][i]) for s in splits],
                "mean_fit_s": float(cv_results["mean_fit_time"][i]),
            }
        )
    rows.sort(key=lambda r: (r["rank"], -r["mean_test_score"]))
    return rows


def _load_search_data(task: dict[str, Any]) -> tuple[Any, np.ndarray, np.ndarray]:
    """``(X, classes, class indices)`` of the task's data, X as the search fits it
    (:func:`prepare_X`); ValueError for fewer than two classes or fewer rows of a class
    than ``cv``."""
    X, y = load_dataset(task["data"], fmt=task.get("data_format"))
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError("the training data has a single class; need at least 2")
    counts = np.bincount(y_idx)
    if counts.min() < task["cv"]:
        raise ValueError(
            f"class {classes[int(np.argmin(counts))]!r} has {int(counts.min())} rows, fewer than cv={task['cv']}"
        )
    return prepare_X(X), classes, y_idx


def run_search(
    task: dict[str, Any],
    stage: Callable[[str], Any] | None = None,
    *,
    client=None,
):
    """Load the task's data and run its grid search (the worker's work for a search job).

    Parameters
    ----------
    task : dict
        ``data``, ``data_format``, ``estimator``, ``grid`` (estimator names), ``cv``,
        ``random_state``, ``base_params``, ``n_jobs`` (joblib workers of the local pool).
    stage : callable(str), optional
        Told ``"loading"``, ``"searching"``.
    client : distributed.Client, optional
        Run the fits on this dask cluster (joblib's dask backend, ``X``/``y`` scattered once).

    Returns
    -------
    estimator : the best candidate refitted on all rows (fitted on class indices ``0..K-1``)
    result : dict
        ``n_train``, ``n_features``, ``classes``, ``load_seconds``, ``train_seconds`` (the
        whole search), ``search`` = {``estimator``, ``cv``, ``n_candidates``, ``best_params``
        (JSON names), ``best_score``, ``table`` (:func:`score_table`), ``base_params``,
        ``random_state``, ``backend``}.

    Raises
    ------
    ValueError, OSError
        Unreadable data, fewer than two classes or fewer rows of a class than ``cv``.
    """
    tell = stage or (lambda s: None)
    tell("loading")
    t0 = time.perf_counter()
    Xf, classes, y_idx = _load_search_data(task)
    load_seconds = time.perf_counter() - t0
    tell("searching")
    base = make_base(task["estimator"], task["base_params"])
    from sklearn.model_selection import GridSearchCV

    search = GridSearchCV(
        base,
        task["grid"],
        cv=folds(int(task["cv"]), int(task["random_state"])),
        n_jobs=-1 if client is not None else task.get("n_jobs"),
        refit=True,
        error_score="raise",
    )
    t1 = time.perf_counter()
    if client is not None:
        import joblib

        backend = joblib.parallel_backend("dask", client=client, scatter=[Xf, y_idx])
    else:
        backend = contextlib.nullcontext()
    with backend:
        search.fit(Xf, y_idx)
    train_seconds = time.perf_counter() - t1
    best = {json_param(k): v for k, v in search.best_params_.items()}
    result = {
        "algorithm": "search",
        "n_train": int(Xf.shape[0]),
        "n_features": int(Xf.shape[1]),
        "classes": [_label(c) for c in classes],
        "load_seconds": load_seconds,
        "train_seconds": train_seconds,
        "search": {
            "estimator": task["estimator"],
            "cv": int(task["cv"]),
            "random_state": int(task["random_state"]),
            "n_candidates": len(search.cv_results_["params"]),
            "best_params": best,
            "best_score": float(search.best_score_),
            "table": score_table(search.cv_results_),
            "base_params": dict(task["base_params"]),
            "backend": "dask" if client is not None else "local",
        },
    }
    return search.best_estimator_, result


def _label(value: Any) -> Any:
    """A JSON label: integral numbers as int, other numbers as float, strings as str."""
    if isinstance(value, (str, np.str_)):
        return str(value)
    value = float(value)
    return int(value) if value.is_integer() else value
