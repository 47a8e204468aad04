"""Request and response shapes of the HTTP API.

Only shapes live here.  The hot ``/learn`` and ``/predict`` bodies are not validated
through pydantic (that would copy every number into Python objects twice): they are
parsed by :mod:`app.batches`, and the models below only document them in the OpenAPI
schema.  :class:`ModelConfig` is the one real validator here: it normalises a model's
hyperparameters and label set.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationInfo, field_validator,
                      model_validator)

Label = Union[StrictInt, StrictFloat, str]
"""A class label as it appears in JSON: a number or a string (never a boolean)."""

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

Algorithm = Literal["bsgd", "bsca"]
"""``bsgd``: :class:`solvers.BudgetedSGDClassifier`; ``bsca``: :class:`solvers.BudgetedSCAClassifier`
(streaming mode; ``schedule``, ``eta``, ``radius`` and ``fit_intercept`` do not apply to it)."""
BatchAlgorithm = Literal["dcsvm", "avsf", "liblinear-cd"]
"""Models trained by a batch job (``POST /jobs``, :mod:`app.jobs`); they serve predictions
but do not learn online.  Not accepted by ``PUT /models``."""
BATCH_ALGORITHMS = ("dcsvm", "avsf", "liblinear-cd")
Maintenance = Literal["merge", "remove", "project"]
MergeSolver = Literal["gss", "gss-precise", "lookup-h", "lookup-wd"]
Schedule = Literal["pegasos", "norma", "perceptron"]


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


class ModelConfig(BaseModel):
    """Hyperparameters of one named model (fully resolved, defaults filled in).

    JSON uses the key ``"lambda"`` for :attr:`lambda_`.  The regularisation is
    ``lambda`` when given, else ``1 / (C * n)`` with ``n = n_samples`` when given, else the
    number of rows of the first batch (Wang, Crammer & Vucetic 2012, Pegasos objective).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False, frozen=True)

    algorithm: Algorithm | BatchAlgorithm = "bsgd"
    budget: int = Field(500, ge=1, description="maximum number of support vectors B")
    gamma: float = Field(1.0, gt=0, description="RBF kernel width: k(x,x') = exp(-gamma ||x-x'||^2)")
    C: float | None = Field(1.0, gt=0, description="SVM C; lambda = 1/(C n) unless lambda is given")
    lambda_: float | None = Field(None, alias="lambda", gt=0, description="regularisation lambda (overrides C)")
    n_samples: int | None = Field(None, ge=1, description="n in lambda = 1/(C n); default: rows of the first batch")
    n_features: int | None = Field(None, ge=1, description="input dimension d; default: fixed by the first accepted batch")
    classes: list[Label] = Field(default_factory=lambda: [-1, 1], description="the two class labels")
    random_state: int | None = Field(None, description="seed of the solver's random number generator")
    maintenance: Maintenance = Field("merge", description="budget maintenance: merge two SVs, remove one, or project it")
    merge_solver: MergeSolver = Field("gss", description="how merging finds h: golden section search or lookup tables")
    schedule: Schedule = Field("pegasos", description="bsgd learning rate: 1/(lambda t), eta/sqrt(t), or margin perceptron")
    eta: float = Field(1.0, gt=0, description="bsgd: base learning rate of norma and perceptron")
    radius: float | None = Field(None, gt=0, description="bsgd perceptron: radius U of the ball (default 1/sqrt(lambda))")
    fit_intercept: bool = Field(False, description="bsgd: learn an unregularised bias b")

    @field_validator("classes")
    @classmethod
    def _check_classes(cls, value: list[Any], info: ValidationInfo) -> list[Any]:
        value = normalise_classes(value)
        if info.data.get("algorithm") in BATCH_ALGORITHMS and len(value) >= 2:
            return value  # batch-trained models may be multi-class (one-vs-rest)
        if len(value) != 2:
            algorithm = info.data.get("algorithm", "bsgd")
            raise ValueError(f"a {algorithm!r} model is binary: give exactly 2 classes, got {len(value)}")
        return value

    @model_validator(mode="after")
    def _check_regularisation(self) -> "ModelConfig":
        if self.C is None and self.lambda_ is None:
            raise ValueError("give either C or lambda")
        return self

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict with the public key names (``"lambda"``)."""
        return self.model_dump(by_alias=True)


class ModelCreate(BaseModel):
    """Body of ``PUT /models/{name}``: any subset of :class:`ModelConfig`; the rest comes
    from the server's ``SVMSTREAM_DEFAULT_*`` settings."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    algorithm: Algorithm | None = None
    budget: int | None = Field(None, ge=1)
    gamma: float | None = Field(None, gt=0)
    C: float | None = Field(None, gt=0)
    lambda_: float | None = Field(None, alias="lambda", gt=0)
    n_samples: int | None = Field(None, ge=1)
    n_features: int | None = Field(None, ge=1)
    classes: list[Label] | None = None
    random_state: int | None = None
    maintenance: Maintenance | None = None
    merge_solver: MergeSolver | None = None
    schedule: Schedule | None = None
    eta: float | None = Field(None, gt=0)
    radius: float | None = Field(None, gt=0)
    fit_intercept: bool | None = None


Features = Union[list[float], dict[str, float]]


class LearnRequest(BaseModel):
    """Body of ``POST /learn`` (documentation only; parsed by :mod:`app.batches`)."""

    model: str | None = Field(None, description="model name; default: the server's default model")
    X: list[Features] = Field(description="examples: dense lists of d numbers, or sparse {\"index\": value} maps with 0-based indices")
    y: list[Label] = Field(description="one label per example, from the model's classes")
    n_features: int | None = Field(None, description="optional: the input dimension the rows are meant for")


class PredictRequest(BaseModel):
    """Body of ``POST /predict`` (documentation only; parsed by :mod:`app.batches`)."""

    model: str | None = None
    X: list[Features]
    n_features: int | None = None


class ModelInfo(BaseModel):
    """Response of ``GET /models/{name}``."""

    name: str
    algorithm: str
    budget: int
    config: dict[str, Any]
    n_features: int | None
    fitted: bool
    n_support_vectors: int
    t: int = Field(description="SGD steps taken")
    n_merges: int
    merging_frequency: float = Field(0.0, description="budget maintenance events per step")
    average_weight_degradation: float = Field(0.0, description="mean weight degradation per maintenance event")
    n_seen: int = Field(description="examples applied")
    lambda_eff: float | None
    version: int = Field(description="batches applied since creation")
    pending_batches: int
    last_snapshot_time: float | None = Field(description="unix time of the last snapshot written or restored")
    last_snapshot_path: str | None
    extra: dict[str, Any]
    statistics: dict[str, Any] = Field(default_factory=dict, description="the estimator's statistics(): merges, "
                                       "merging_frequency, average_weight_degradation, ...")
    metrics: dict[str, Any] = Field(default_factory=dict, description="applied/s, prequential accuracy, "
                                    "snapshot age, stream lag/pending/dead letters")


class LearnResponse(BaseModel):
    model: str
    n_examples: int
    version: int
    n_seen: int
    n_support_vectors: int
    t: int


class PredictResponse(BaseModel):
    model: str
    version: int
    labels: list[Label]
    decision: list[float]


class ErrorResponse(BaseModel):
    detail: str = Field(description="message; for input errors it starts with the field, e.g. 'X[3][5]: ...'")
    field: str | None = None
    index: int | None = Field(None, description="index of the first offending example, if any")
