"""Request and response shapes of the HTTP API.

Only shapes live here.  The hot ``/learn`` and ``/predict`` bodies are not validated
through pydantic (that would copy every number into Python objects twice): they are
parsed by :mod:`svmstream.app.ingest.examples`, and the models below only document them
in the OpenAPI schema.  :class:`ModelCreate` validates the body of ``PUT /models``; the
resolved configuration it becomes is :class:`svmstream.app.models.config.ModelConfig`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from svmstream.app.models.config import (
    C_MAX,
    LAMBDA_MIN,
    MAX_CLASSES_LIMIT,
    Algorithm,
    Gamma,
    Kernel,
    Label,
    Maintenance,
    MergeSolver,
    OnDrift,
    Scaling,
    Schedule,
    SvStorage,
)


class ModelCreate(BaseModel):
    """Body of ``PUT /models/{name}``: any subset of :class:`ModelConfig`; the rest comes
    from the server's ``SVMSTREAM_DEFAULT_*`` settings."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    algorithm: Algorithm | None = None
    kernel: Kernel | None = None
    budget: int | None = Field(None, ge=1)
    gamma: Gamma | None = None
    C: float | None = Field(None, gt=0, le=C_MAX)
    lambda_: float | None = Field(None, alias="lambda", ge=LAMBDA_MIN)
    n_samples: int | None = Field(None, ge=1)
    n_features: int | None = Field(None, ge=1)
    classes: list[Label] | None = Field(
        None, description="2 or more labels; omitted: learned from the data (up to max_classes)"
    )
    max_classes: int | None = Field(None, ge=2, le=MAX_CLASSES_LIMIT)
    random_state: int | None = None
    maintenance: Maintenance | None = None
    merge_solver: MergeSolver | None = None
    schedule: Schedule | None = None
    eta: float | None = Field(None, gt=0)
    radius: float | None = Field(None, gt=0)
    fit_intercept: bool | None = None
    scaling: Scaling | None = None
    warmup: int | None = Field(None, ge=0)
    shuffle_buffer: int | None = Field(None, ge=0)
    run_guard: bool | None = None
    on_drift: OnDrift | None = None
    sv_storage: SvStorage | None = None


Features = list[float] | dict[str, float]


class LearnRequest(BaseModel):
    """Body of ``POST /learn`` (documentation only; parsed by :mod:`svmstream.app.ingest.examples`)."""

    model: str | None = Field(None, description="model name; default: the server's default model")
    X: list[Features] = Field(
        description='examples: dense lists of d numbers, or sparse {"index": value} maps with 0-based indices'
    )
    y: list[Label] = Field(description="one label per example, from the model's classes")
    n_features: int | None = Field(None, description="optional: the input dimension the rows are meant for")


class PredictRequest(BaseModel):
    """Body of ``POST /predict`` (documentation only; parsed by :mod:`svmstream.app.ingest.examples`)."""

    model: str | None = None
    X: list[Features]
    n_features: int | None = None
    proba: bool = Field(False, description="also answer calibrated class probabilities")


class ModelInfo(BaseModel):
    """Response of ``GET /models/{name}``."""

    name: str
    algorithm: str
    budget: int
    config: dict[str, Any]
    n_features: int | None
    classes: list[Label] = Field(
        default_factory=list,
        description="the model's labels: declared, or learned so far in order of appearance",
    )
    classes_learned: bool = Field(False, description="true when the labels are learned from the data")
    fitted: bool
    n_support_vectors: int
    t: int = Field(description="SGD steps taken")
    n_merges: int
    merging_frequency: float = Field(0.0, description="budget maintenance events per step")
    average_weight_degradation: float = Field(
        0.0, description="mean weight degradation per maintenance event"
    )
    n_seen: int = Field(description="examples received (learned or pending)")
    lambda_eff: float | None = Field(description="the lambda in use")
    gamma_eff: float | None = Field(None, description="the gamma in use (null while warming up)")
    scaling: str | None = Field(None, description="the feature scaling in use (null while warming up)")
    warming_up: bool = Field(False, description="true while the warm-up window is open (/predict: 409)")
    pending: int = Field(0, description="examples received but not learned yet (window + shuffle buffer)")
    n_replayed: int = Field(0, description="examples the run guard replayed")
    n_discarded: int = Field(0, description="buffered examples dropped at drift detections (on_drift)")
    drift: dict[str, Any] = Field(
        default_factory=dict,
        description="drift detections on the prequential errors: detections, last_at (example count)",
    )
    version: int = Field(description="batches applied since creation")
    pending_batches: int
    last_snapshot_time: float | None = Field(description="unix time of the last snapshot written or restored")
    last_snapshot_path: str | None
    extra: dict[str, Any]
    statistics: dict[str, Any] = Field(
        default_factory=dict,
        description="the estimator's statistics(): merges, "
        "merging_frequency, average_weight_degradation, ...",
    )
    metrics: dict[str, Any] = Field(
        default_factory=dict,
        description="applied/s, prequential accuracy, snapshot age, stream lag/pending/dead letters",
    )


class LearnResponse(BaseModel):
    model: str
    n_examples: int
    version: int
    n_seen: int
    n_support_vectors: int
    t: int
    buffered: int = Field(description="examples pending after this batch (warm-up window + shuffle buffer)")


class FlushResponse(BaseModel):
    model: str
    flushed: int = Field(description="pending examples learned by this call")
    version: int
    n_seen: int
    n_support_vectors: int
    t: int
    buffered: int


class PredictResponse(BaseModel):
    model: str
    version: int
    labels: list[Label]
    decision: list[float] | list[list[float]] = Field(
        description="binary: f(x) (> 0: classes[1]); multi-class: one score per class, in classes order"
    )
    classes: list[Label] | None = Field(None, description='with "proba": the column order of proba')
    proba: list[list[float]] | None = Field(
        None, description='with "proba": true: calibrated probabilities, rows sum to 1, argmax = label'
    )


class ErrorResponse(BaseModel):
    detail: str = Field(description="message; for input errors it starts with the field, e.g. 'X[3][5]: ...'")
    field: str | None = None
    index: int | None = Field(None, description="index of the first offending example, if any")
