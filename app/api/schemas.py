"""Request and response shapes of the HTTP API.

Only shapes live here.  The hot ``/learn`` and ``/predict`` bodies are not validated
through pydantic (that would copy every number into Python objects twice): they are
parsed by :mod:`svmstream.app.ingest.examples`, and the models below only document them
in the OpenAPI schema.  :class:`ModelCreate` validates the body of ``PUT /models``; the
resolved configuration it becomes is :class:`svmstream.app.models.config.ModelConfig`.
"""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator

from svmstream.app.models.config import HYPERPARAMETERS, Label
from svmstream.app.settings import hyperparameter_field


def _json_kinds(annotation: Any) -> set[type]:
    """The JSON value types a field annotation admits (``int``, ``float``, ``str``, ``bool``,
    ``list``, ``dict``, ``NoneType``), looking through unions, ``Annotated`` and ``Literal``."""
    if annotation is None or annotation is type(None):
        return {type(None)}
    if get_origin(annotation) is Literal:
        return {type(v) for v in get_args(annotation)}
    if get_origin(annotation) is Annotated:
        return _json_kinds(get_args(annotation)[0])
    args = get_args(annotation)
    if args and get_origin(annotation) in (Union, UnionType):
        return set().union(*(_json_kinds(a) for a in args))
    origin = get_origin(annotation) or annotation
    return {origin} if isinstance(origin, type) else {object}


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class JsonBody(BaseModel):
    """Base of the request bodies pydantic validates (``PUT /models``, ``POST /jobs``): a
    number must be a JSON number and a boolean a JSON boolean.  Pydantic's lax mode would
    read ``"5"`` as 5 and ``0`` as false, which the OpenAPI schema does not allow (found by
    schemathesis: schema-violating requests accepted), nor ``50.0`` as the integer 50."""

    @field_validator("*", mode="before")
    @classmethod
    def _json_types(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = _json_kinds(cls.model_fields[info.field_name].annotation)
        if object in kinds or value is None:
            return value
        numeric = bool(kinds & {int, float})
        if isinstance(value, bool):
            if bool not in kinds:
                raise ValueError(
                    f"expected {'a number' if numeric else 'no boolean'}, got {str(value).lower()}"
                )
        elif isinstance(value, str):
            if str not in kinds or (numeric and _looks_numeric(value)):  # gamma: a number or "scale"
                raise ValueError(f"expected {'a number' if numeric else 'no string'}, got {value!r}")
        elif isinstance(value, (int, float)) and not numeric:
            if bool in kinds:
                raise ValueError(f"expected true or false, got {value!r}")
        elif isinstance(value, float) and float not in kinds:  # budget: 50.0 is not an integer
            raise ValueError(f"expected an integer, got {value!r}")
        return value


_ModelCreateFields = create_model(  # type: ignore[call-overload]
    "_ModelCreateFields",
    __base__=JsonBody,
    **{
        row.name: hyperparameter_field(row, optional=True, request=True, item=Label, default=None)
        for row in HYPERPARAMETERS
    },
)


class ModelCreate(_ModelCreateFields):
    """Body of ``PUT /models/{name}``: any subset of :class:`ModelConfig`; the rest comes
    from the server's ``SVMSTREAM_DEFAULT_*`` settings.  One field per row of the hyperparameter
    table (:mod:`svmstream.solvers._hyperparameters`): its bounds, choices and help.  ``budget``'s
    schema says 2 (the estimators' own check: room for a merge) while validation keeps 1, so that
    budget 1 gets the estimator's message (``config: budget must be an integer >= 2``); the check of
    ``classes`` names the problem itself (the schema says 2 or more distinct labels)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)

    challengers: list[dict[str, Any]] | None = Field(
        None,
        max_length=16,
        description='shadow models beside the champion: each the settings it changes (e.g. {"gamma": 2}); '
        "they learn the same examples, are scored against the champion and promoted only on evidence "
        "(docs/challengers.md)",
    )
    fields: dict[str, dict[str, Any]] | None = Field(
        None,
        description='a declared schema of named fields: {name: {"kind": "number" | "boolean" | "category" | '
        '"text", "categories": [...]}}; declared categories take the first columns; other fields are '
        "learned as they come (docs/fields.md)",
    )


Features = Annotated[list[float], Field(min_length=1)] | dict[str, float]
"""A row: d numbers (at least one), or a sparse ``{"index": value}`` map (may be empty: all zeros)."""

_NON_EMPTY = {"minItems": 1}


class LearnRequest(BaseModel):
    """Body of ``POST /learn`` (documentation only; parsed by :mod:`svmstream.app.ingest.examples`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"X": [[5.1, 3.5, 1.4], [6.7, 3.0, 5.2]], "y": ["setosa", "virginica"]}]
        }
    )

    model: str | None = Field(None, description="model name; default: the server's default model")
    X: list[Features] = Field(
        description='examples: dense lists of d numbers, or sparse {"index": value} maps with 0-based indices',
        json_schema_extra=_NON_EMPTY,
    )
    y: list[Label] | None = Field(
        None,
        description="one label per example, from the model's classes; a regression model: one finite number "
        "per example; a novelty model: none, or 0/1 evaluation labels (docs/regression.md, docs/novelty.md)",
        json_schema_extra=_NON_EMPTY,
    )
    w: list[float] | None = Field(
        None,
        description="optional: one importance weight per example, finite and >= 0 (the example's loss "
        "term scaled by w, as scikit-learn's sample_weight; 0: received, learns nothing; docs/weights.md)",
    )
    n_features: int | None = Field(
        None, ge=1, description="optional: the input dimension the rows are meant for"
    )


class PredictRequest(BaseModel):
    """Body of ``POST /predict`` (documentation only; parsed by :mod:`svmstream.app.ingest.examples`)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"X": [[5.1, 3.5, 1.4]], "proba": True}]})

    model: str | None = None
    X: list[Features] = Field(json_schema_extra=_NON_EMPTY)
    n_features: int | None = Field(None, ge=1)
    proba: bool = Field(False, description="also answer calibrated class probabilities")
    version: int | None = Field(
        None,
        ge=0,
        description="answer from this version of the model's history (GET /models/{name}/versions)",
    )
    remember: bool | None = Field(
        None,
        description="keep the rows and answer ids for POST /feedback (default: the model's "
        "remember setting; docs/feedback.md)",
    )
    interval: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="a regression model: also answer lower and upper bounds of this coverage",
    )


class ModelInfo(BaseModel):
    """Response of ``GET /models/{name}``."""

    challengers: list[dict[str, Any]] = Field(
        default_factory=list,
        description="the challengers: settings, origin, examples seen, paired examples, wins, losses, "
        "e_value and threshold of the promotion test, window accuracies (docs/challengers.md)",
    )
    promotion: dict[str, Any] | None = Field(
        None,
        description="the promotion test's settings, the model's position, held rows, promotions and history",
    )

    name: str
    task: str = Field("classification", description="classification, regression or novelty")
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
    lambda_reason: str | None = Field(
        None, description="why lambda_eff is what it is (C, n_samples or lambda given)"
    )
    algorithm_reason: str | None = Field(
        None, description="why the model runs its algorithm (a C without lambda selects bsca)"
    )
    kind: str | None = Field(
        None,
        description='what the model is, in one line: "selection of 4 candidates, 2 racing, leader 1 × scale '
        '(C = 1)", "BSGD pipeline, gss merging, budget 500", "DC-SVM batch model" (docs/service.md)',
    )
    gamma_eff: float | None = Field(None, description="the gamma in use (null while warming up)")
    scaling: str | None = Field(None, description="the feature scaling in use (null while warming up)")
    warming_up: bool = Field(False, description="true while the warm-up window is open (/predict: 409)")
    pending: int = Field(0, description="examples received but not learned yet (window + shuffle buffer)")
    n_replayed: int = Field(0, description="examples the run guard replayed")
    n_discarded: int = Field(
        0,
        description="buffered examples dropped at drift detections by models saved before drops were removed",
    )
    examples: dict[str, int] = Field(
        default_factory=dict,
        description="the example account: received = learned + pending + refused (refused: stream entries "
        "dead-lettered by this process)",
    )
    scaling_reason: str | None = Field(None, description="why the scaling in use was chosen")
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
    model_version: int = Field(
        description="the model version that answered (batches applied; equal to version): a replica "
        "serves the learner's snapshot of that version (docs/deployment.md)"
    )
    labels: list[Label] | None = Field(None, description="a classifier's predicted labels")
    decision: list[float] | list[list[float]] | None = Field(
        None,
        description="a classifier's: binary: f(x) (> 0: classes[1]); multi-class: one score per class, in "
        "classes order",
    )
    values: list[float] | None = Field(None, description="a regression model's predictions")
    interval: float | None = Field(None, description='with "interval": the coverage of lower and upper')
    lower: list[float] | None = Field(None, description='with "interval": split-conformal lower bounds')
    upper: list[float] | None = Field(None, description='with "interval": split-conformal upper bounds')
    scores: list[float] | None = Field(None, description="a novelty model's anomaly scores (higher: rarer)")
    outlier: list[bool] | None = Field(None, description="a novelty model's flags: score above threshold")
    threshold: float | None = Field(None, description="a novelty model's threshold (5 % false alarms)")
    classes: list[Label] | None = Field(None, description='with "proba": the column order of proba')
    proba: list[list[float]] | None = Field(
        None, description='with "proba": true: calibrated probabilities, rows sum to 1, argmax = label'
    )
    ids: list[str] | None = Field(
        None, description='with "remember": one opaque prediction id per row, for POST /feedback'
    )


class ErrorResponse(BaseModel):
    """Every error body of the service (:func:`svmstream.app.errors.error_response`)."""

    detail: str = Field(description="message; for input errors it starts with the field, e.g. 'X[3][5]: ...'")
    field: str | None = Field(description="locator of the offending value ('X[3][5]', 'y[7]', 'body', ...)")
    index: int | None = Field(description="index of the first offending example, if any")


class ModelList(BaseModel):
    """Response of ``GET /models``."""

    models: list[ModelInfo]


class Deleted(BaseModel):
    """Response of ``DELETE /models/{name}`` and ``DELETE /uploads/{id}``."""

    deleted: str = Field(description="the name or id deleted")


class HealthResponse(BaseModel):
    """Response of ``GET /health``."""

    status: str = Field(description='"ok"')
    models: list[str]
    uptime_s: float
    pid: int | None = Field(description="null for a caller without the token when one is set")
    rss_bytes: int | None = Field(description="resident set size (Linux), null elsewhere")
    solvers: Literal["compiling", "ready"] = Field(
        description='"compiling" while the background warm-up compiles (or loads) the solver kernels: '
        "requests are served meanwhile, those needing a kernel not compiled yet wait for it"
    )


class JobInfo(BaseModel):
    """A batch job (``POST /jobs``, ``GET /jobs/{id}``, ``DELETE /jobs/{id}``); see docs/jobs.md."""

    id: str
    state: str = Field(description="queued, running, succeeded, failed or cancelled")
    algorithm: str
    model: str
    data: str
    test: str | None
    params: dict[str, Any]
    early_level: int | None
    replace: bool
    created_at: float
    started_at: float | None
    finished_at: float | None
    elapsed_s: float | None
    pid: int | None
    exitcode: int | None
    progress: dict[str, Any] = Field(description="phase, stage, level, objective, max_violation, elapsed")
    timeline: list[dict[str, Any]]
    result: dict[str, Any] | None
    error: str | None
    cancel: dict[str, Any] | None = Field(description="the cancellation record, if cancelled")
    search: dict[str, Any] | None = Field(
        None,
        description="search jobs only: estimator, grid, cv, random_state (the scores are in result.search)",
    )


class JobList(BaseModel):
    """Response of ``GET /jobs`` (newest first)."""

    jobs: list[JobInfo]


class UploadInfo(BaseModel):
    """A stored upload (``GET /uploads``)."""

    id: str = Field(description="pass it as data/test of POST /jobs")
    format: str = Field(description="libsvm or csv")
    compression: str | None = Field(description="bz2, gzip or null")
    bytes: int
    created_at: float
    filename: str = Field(description="the stored file's name")


class UploadCreated(UploadInfo):
    """Response of ``POST /uploads``."""

    original_filename: str | None = Field(description="the client's file name, if given")


class UploadList(BaseModel):
    """Response of ``GET /uploads``."""

    uploads: list[UploadInfo]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: each status answered with :class:`ErrorResponse`.

    >>> sorted(errors(404, 422))
    [404, 422]
    """
    return {status: {"model": ErrorResponse, "description": ERROR_MEANINGS[status]} for status in statuses}


ERROR_MEANINGS = {
    400: "malformed JSON or a bad header",
    401: "missing or wrong bearer token (WWW-Authenticate: Bearer)",
    403: "refused: a data path outside the data directory or disabled",
    404: "no such model, job, upload or data file",
    409: "conflict: model not fitted or warming up, batch-trained, replaced meanwhile, job finished",
    413: "body over the byte limit (the connection is closed), or a batch that would grow the models over "
    "max_total_model_bytes",
    415: "body not sent as application/json",
    421: "several learners: a forwarded /learn reached a learner that does not own the model "
    "(the forwarding learner appends the batch instead, docs/cluster.md)",
    422: "a rejected field, named in 'field' and at the start of 'detail'",
    429: "too many batches queued for the model (Retry-After)",
    500: "learning failed (the model was left unchanged), or a server error such as a failed snapshot write",
    503: "the server is shutting down, the job queue is full, or too many large bodies are being read "
    "(Retry-After)",
}

JSON_BODY_ERRORS = (400, 413, 415, 422)
"""What any route that reads a JSON body may answer (:func:`svmstream.app.api.http.read_json_body`)."""
