"""The resolved hyperparameters of one named model (:class:`ModelConfig`), its label set
and the rule for model names.

Shared by the HTTP schemas, the registry, snapshots, the stream consumer, the job runner
and the CLI; it imports nothing from the service but its settings, nor the solvers' estimators
(importing a solver family compiles-or-loads numba kernels, about a second: ``svmstream
healthcheck`` reads this module and must start fast).  The fields of :class:`ModelConfig`, the
option sets and the constants below come from the hyperparameter table,
:mod:`svmstream.solvers._hyperparameters` (which imports no numba; re-exported here under the
names the service has always used).
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from svmstream.app.errors import InvalidInput
from svmstream.app.settings import hyperparameter_field
from svmstream.solvers._hyperparameters import (  # noqa: F401  (re-exported: the service's names)
    BATCH_ALGORITHMS,
    BY_NAME,
    C_MAX,
    DEFAULT_MAX_CLASSES,
    DEFAULT_REHEARSAL,
    DEFAULT_REHEARSAL_MEMORY,
    DEFAULT_SHUFFLE_BUFFER,
    DEFAULT_WARMUP,
    HYPERPARAMETERS,
    KERNELS_ONLINE,
    LAMBDA_MIN,
    MAINTENANCE,
    MAX_CLASSES_LIMIT,
    MERGE_SOLVERS,
    ON_DRIFT,
    ON_DRIFT_SERVICE,
    ONLINE_ALGORITHMS,
    REFERENCE_N,
    REFERENCE_N_LINEAR,
    REHEARSAL_MAX,
    REHEARSAL_MEMORY_MAX,
    SCALINGS,
    SCHEDULES,
    SELECTION_TASKS,
    SV_STORAGES,
    TASK_DEFAULTS,
)

Label = StrictInt | StrictFloat | str
"""A class label as it appears in JSON: a number or a string (never a boolean)."""

#: The fields that are not learning settings: a model created with only these races candidates
#: (``selection`` null, ``docs/selection.md``).
NOT_SETTINGS = (
    "classes",
    "class_weight",
    "max_classes",
    "n_features",
    "remember",
    "selection",
    "selection_bytes",
    "task",
)


def resolve_selection(given: dict[str, Any], explicit_defaults: dict[str, Any]) -> dict[str, Any]:
    """``given`` (the request's non-null fields, JSON names) with ``selection`` resolved: as given,
    else as an explicitly set server default (``SVMSTREAM_DEFAULT_SELECTION``), else true when no
    field outside :data:`NOT_SETTINGS` is given, by the request or by an explicitly set server
    default (``explicit_defaults``: an operator's default is a setting too)."""
    if "selection" in given or explicit_defaults.get("selection") is not None:
        return given
    settings = {**explicit_defaults, **given}
    chosen = any(k not in NOT_SETTINGS for k, v in settings.items() if v is not None)
    return {**given, "selection": not chosen}


def task_defaults(given: dict[str, Any], explicit_defaults: dict[str, Any]) -> dict[str, Any]:
    """The defaults of the task ``given`` (or an explicitly set server default) names, for the
    fields neither gives (:data:`TASK_DEFAULTS`; JSON names; ``{}`` for classification).  A
    regression model given ``lambda`` without an algorithm runs BSGD (BSCA takes C only)."""
    settings = {**explicit_defaults, **given}
    own = dict(TASK_DEFAULTS.get(settings.get("task") or "classification", {}))
    if own and settings.get("lambda") is not None and own.get("algorithm") == "bsca":
        own["algorithm"] = "bsgd"
    return {k: v for k, v in own.items() if settings.get(k) is None}


def refuse_race_of_given_c(settings: dict[str, Any]) -> None:
    """A classifier's selection model races C (``DEFAULT_CANDIDATES``): a ``C`` or ``lambda``
    given (by the request or an explicitly set server default; JSON names, non-null values) would
    be overridden by a candidate, so it is refused (InvalidInput naming ``selection``).  What a
    task's race varies: :data:`~svmstream.solvers._hyperparameters.SELECTION_TASKS` (a regression
    race varies γ only: its candidates take the C given)."""
    varies = SELECTION_TASKS.get(settings.get("task") or "classification", {}).get("varies", ())
    given = sorted(k for k in varies if settings.get(k) is not None)
    if given:
        raise InvalidInput(
            f"selection: the race varies C (candidates with C = 1 and 0.1, docs/selection.md): give "
            f"{given[0]} or selection, not both",
            field="selection",
        )


MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MODEL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
"""Valid model names: 1-64 characters ``[A-Za-z0-9_.-]``, starting alphanumeric (they are
also directory and file names of the snapshots).  Matched whole (``fullmatch``; ``\\Z``, not
``$``, which also matches before a final newline: ``"abc\\n"`` would pass and its snapshot
files would never be restored)."""
MODEL_NAME_RULE = "use 1-64 characters [A-Za-z0-9_.-], starting alphanumeric"

Algorithm = Literal[ONLINE_ALGORITHMS]  # type: ignore[valid-type]
"""``bsgd``: :class:`svmstream.solvers.BudgetedSGDClassifier`; ``bsca``:
:class:`svmstream.solvers.BudgetedSCAClassifier` (streaming mode; ``schedule``, ``eta``,
``radius``, ``fit_intercept`` and ``kernel`` do not apply to it)."""
BatchAlgorithm = Literal[BATCH_ALGORITHMS]  # type: ignore[valid-type]
"""Models trained by a batch job (``POST /jobs``, :mod:`svmstream.app.jobs`); they serve
predictions but do not learn online.  Not accepted by ``PUT /models``."""
Maintenance = Literal[tuple(MAINTENANCE)]  # type: ignore[valid-type]
MergeSolver = Literal[tuple(MERGE_SOLVERS)]  # type: ignore[valid-type]
Schedule = Literal[tuple(SCHEDULES)]  # type: ignore[valid-type]
OnDrift = Literal[ON_DRIFT_SERVICE]  # type: ignore[valid-type]
"""What an online model does when its drift detector fires (``docs/online.md``)."""
Scaling = Literal[SCALINGS]  # type: ignore[valid-type]
"""Feature scaling frozen from the warm-up window; ``auto`` is max-abs (``docs/defaults.md``)."""
Gamma = hyperparameter_field(BY_NAME["gamma"])[0]
"""RBF width: a positive number, or ``"scale"``: 1 / (d · Var) of the scaled warm-up window."""
SvStorage = Literal[SV_STORAGES]  # type: ignore[valid-type]
"""Support-vector storage of an RBF model: ``auto`` picks sparse SVs when the first batch is
sparse rows, wide (d > 256) and at most 10% nonzero (``docs/defaults.md``)."""
Kernel = Literal[KERNELS_ONLINE]  # type: ignore[valid-type]
"""``bsgd`` only: the budgeted Gaussian-kernel SVM, or a linear SVM with an explicit weight
matrix (Pegasos; no support vectors: ``budget`` and ``gamma`` do not apply; ``docs/defaults.md``)."""


def check_model_name(name: str) -> None:
    """Raises ValueError ``"invalid model name ...: use 1-64 characters ..."``."""
    if not MODEL_NAME_RE.fullmatch(name):
        raise ValueError(f"invalid model name {name!r}: {MODEL_NAME_RULE}")


def normalise_classes(classes: list[Any]) -> list[Any]:
    """Return the label set of a model in canonical form.

    Numbers become ``int`` when integral (``1.0 -> 1``) so that labels compare
    numerically; the set is sorted (numbers ascending, or strings lexicographically),
    which is the scikit-learn convention: ``classes[1]`` is the positive class of a
    binary model (decision value > 0).

    Raises
    ------
    ValueError
        On booleans, non-finite numbers, a mix of numbers and strings, or duplicates.
    """
    out: list[Any] = []
    for c in classes:
        if isinstance(c, bool) or not isinstance(c, (int, float, str)):
            raise ValueError(f"class label {c!r} must be a number or a string")
        if isinstance(c, float):
            if not math.isfinite(c):
                raise ValueError(f"class label {c!r} is not finite")
            if c.is_integer():
                c = int(c)
        out.append(c)
    kinds = {isinstance(c, str) for c in out}
    if len(kinds) > 1:
        raise ValueError("classes must be all numbers or all strings")
    if len(set(out)) != len(out):
        raise ValueError(f"duplicate class labels in {classes!r}")
    return sorted(out)


_ModelConfigFields = create_model(  # type: ignore[call-overload]
    "_ModelConfigFields",
    **{row.name: hyperparameter_field(row, stored=True, item=Label) for row in HYPERPARAMETERS},
)


class ModelConfig(_ModelConfigFields):
    """Hyperparameters of one named model (fully resolved, defaults filled in); one field per row
    of the hyperparameter table (:mod:`svmstream.solvers._hyperparameters`), in its order.

    JSON uses the key ``"lambda"`` for :attr:`lambda_`.  The regularisation is
    ``lambda`` when given, else ``1 / (C * n)`` with ``n = n_samples`` when given, else
    ``n = 30,000`` (a stream of unknown length; C = 1 gives λ ≈ 3.3e-5; ``kernel="linear"``:
    n = 5,000, λ = 2e-4) -- never a batch size.
    Online models warm up on their first ``warmup`` examples (scaling and ``gamma="scale"``
    are fixed from them), then learn through a shuffle buffer and a run guard
    (``docs/defaults.md``).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False, frozen=True)

    @field_validator("classes")
    @classmethod
    def _check_classes(cls, value: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        if value is None:
            return None
        value = normalise_classes(value)
        if len(value) < 2:
            raise ValueError(f"give at least 2 classes (or omit classes to learn them), got {len(value)}")
        limit = info.data.get("max_classes", DEFAULT_MAX_CLASSES)
        if len(value) > limit:
            raise ValueError(f"{len(value)} labels exceed max_classes = {limit}")
        return value

    @model_validator(mode="after")
    def _check_regularisation(self) -> ModelConfig:
        if self.C is None and self.lambda_ is None:
            raise ValueError("give either C or lambda")
        return self

    @field_validator("selection")
    @classmethod
    def _check_selection(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        if value:
            data = info.data
            task = data.get("task") or "classification"
            if task not in SELECTION_TASKS:
                raise ValueError(
                    f"races classifiers and regressors, not a {task} model (no labels to score on)"
                )
            algorithms = SELECTION_TASKS[task]["algorithms"]
            if data.get("algorithm") not in algorithms or data.get("kernel") != "rbf":
                shown = " or ".join(f'"{a}"' for a in algorithms)
                raise ValueError(f'races budgeted RBF models: algorithm {shown} and kernel "rbf" only')
            if data.get("gamma") != "scale":
                raise ValueError('races gamma (factors of "scale"): give gamma or selection, not both')
        return value

    @property
    def reference_n(self) -> int:
        """n in lambda = 1/(C n) when ``n_samples`` is not given (depends on ``kernel``)."""
        return REFERENCE_N_LINEAR if self.kernel == "linear" else REFERENCE_N

    @property
    def lambda_reason(self) -> str:
        """Why the model's λ is what it is (``GET /models/{name}`` shows it beside ``lambda_eff``):
        a C from a batch SVM means λ = 1/(C·n) with n its training rows, which a stream cannot
        know, so a C without ``n_samples`` says which n it assumed."""
        if self.lambda_ is not None:
            return "lambda given"
        if self.algorithm == "bsca":
            return (
                f"bsca: C = {self.C:g} bounds each example's dual coefficient, on a stream of any length "
                "(lambda_eff = 1/(C * n) is shown for comparison with bsgd only)"
            )
        if self.n_samples is not None:
            return f"lambda = 1/(C * n_samples) = 1/({self.C:g} * {self.n_samples:,}): C and n_samples given"
        return (
            f"lambda = 1/(C * n) = 1/({self.C:g} * {self.reference_n:,}): no n_samples, so n = "
            f"{self.reference_n:,} is assumed for a stream of unknown length; give n_samples (the rows "
            "C was chosen on) for C's batch meaning, or lambda"
        )

    @property
    def algorithm_reason(self) -> str:
        """Why the model runs its algorithm (``GET /models/{name}``; the rule:
        :func:`~svmstream.solvers._hyperparameters.default_algorithm`, ``docs/defaults.md``)."""
        if self.algorithm == "bsca" and self.C is not None and self.lambda_ is None:
            return (
                "bsca: given, or chosen because C was given without lambda (bsca's C is the box "
                "constraint of each dual coefficient and needs no n; bsgd's would need lambda = 1/(C n))"
            )
        if self.algorithm == "bsgd":
            return "bsgd: given, or the default (no C without lambda; bsgd-only settings select it too)"
        return f"{self.algorithm}: given"

    @property
    def learns_online(self) -> bool:
        """True for a model that keeps learning (``bsgd``, ``bsca``: an
        :class:`~svmstream.solvers.contract.OnlineModel`); False for one a batch job trained
        (``dcsvm``, ``avsf``, ``liblinear-cd``: served, never learning).  The service's one
        switch between the two."""
        return self.algorithm not in BATCH_ALGORITHMS

    @property
    def learns_classes(self) -> bool:
        """True when the label set is learned from the data (no ``classes`` declared)."""
        return self.classes is None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with the public key names (``"lambda"``)."""
        return self.model_dump(by_alias=True)
