"""Service settings: one place for every knob.

All settings are read from environment variables with the prefix ``SVMSTREAM_``
(case-insensitive), e.g. ``SVMSTREAM_PORT=9000`` or ``SVMSTREAM_SNAPSHOT_INTERVAL_S=5``;
``svmstream serve`` command-line options override them.  See ``docs/service.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, Field, SecretStr, StrictFloat, StrictInt, create_model, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from svmstream.solvers._hyperparameters import HYPERPARAMETERS, Hyperparameter

MIB = 1024 * 1024

_UNSET: Any = object()


def hyperparameter_field(
    row: Hyperparameter,
    *,
    optional: bool = False,
    stored: bool = False,
    request: bool = False,
    item: Any = Any,
    default: Any = _UNSET,
) -> tuple[Any, FieldInfo]:
    """``(annotation, Field(...))`` of a row of the hyperparameter table
    (:mod:`svmstream.solvers._hyperparameters`), for ``create_model``.

    ``optional``: None is accepted (a request's "not given"); ``stored``: the values a resolved
    configuration may hold besides the choices (``algorithm``: batch-job models); ``request``:
    the JSON alias and the extra JSON-schema keys of a request body; ``item``: the type of a
    list's items; ``default``: instead of the row's.
    """
    if row.choices is not None:
        kind: Any = Literal[row.choices + (row.stored if stored else ())]  # type: ignore[valid-type]
    elif row.type is list:
        kind = list[item]
    elif row.type is dict:  # labels (JSON keys) -> weights: finite numbers >= 0, never a string
        kind = dict[str, Annotated[StrictInt | StrictFloat, Field(ge=0, allow_inf_nan=False)]]
    else:
        kind = row.type
    bounds = row.bounds
    if row.words:  # a number or a word: the bounds apply to the number
        kind = Annotated[kind, Field(**bounds)] | Literal[row.words]  # type: ignore[valid-type]
        bounds = {}
    if row.nullable or optional:
        kind = kind | None
    info = Field(
        row.default if default is _UNSET else default,
        description=row.help,
        alias=row.alias if request or stored else None,
        json_schema_extra=dict(row.schema) if request and row.schema else None,
        **bounds,
    )
    return kind, info


#: The ``default_*`` settings: one per row of the hyperparameter table (``SVMSTREAM_DEFAULT_<NAME>``).
_ModelDefaults = create_model(  # type: ignore[call-overload]
    "_ModelDefaults",
    __base__=BaseSettings,
    **{row.setting: hyperparameter_field(row, default=row.server_default) for row in HYPERPARAMETERS},
)


class Settings(_ModelDefaults):
    """Service configuration (environment prefix ``SVMSTREAM_``).

    The ``default_*`` fields are the hyperparameters of models created without them:
    the default model made at start and models created by ``PUT /models/{name}`` that
    omit a field.  They are built from the hyperparameter table
    (:mod:`svmstream.solvers._hyperparameters`): ``default_<name>`` for each row (``default_c``,
    ``default_lambda``), with its type, bounds and the server's default.
    """

    model_config = SettingsConfigDict(
        env_prefix="SVMSTREAM_", case_sensitive=False, extra="ignore", populate_by_name=True
    )

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    log_level: str = "info"

    snapshot_dir: Path = Path("./snapshots")
    snapshot_interval_s: float = Field(30.0, gt=0)
    #: Snapshot files (versions) kept per model besides the marked ones (promoted, rolled back
    #: to): docs/versions.md.
    keep_versions: int = Field(20, ge=1, le=100_000)
    #: Disk budget of one model's history (bytes): past it the oldest versions go first.
    max_history_bytes: int = Field(1024 * MIB, ge=1)
    #: Versions other than the live one held decoded at once for pinned predictions (LRU).
    max_pinned_versions: int = Field(16, ge=0, le=1000)
    #: Bytes those versions may hold decoded, all models together (their serving states:
    #: coefficients, support vectors, scaler, calibrator); past it the least recently used go,
    #: and a version larger than this is refused (503): docs/versions.md.
    max_pinned_bytes: int = Field(64 * MIB, ge=0)
    restore_on_start: bool = True
    warm_up: bool = True

    max_body_bytes: int = Field(64 * MIB, ge=1)
    max_pending_batches: int = Field(8, ge=1)
    #: Learner threads shared by all models (None: the CPU count, 2..16; app/models/learners.py).
    learner_threads: int | None = Field(None, ge=1, le=256)
    #: Added to the learner threads' nice value (Linux, per thread; 0: same priority as the
    #: requests).  Predictions are served by the event loop thread; learning a batch is
    #: throughput work.  On 2 busy cores the loop waited on the run queue 34% of the time
    #: while a client learned, 16% with 10 (p90 of /predict 6.0 -> 3.5 ms; docs/service.md, "Prediction paths").
    learner_nice: int = Field(10, ge=0, le=19)
    max_loaded_models: int = Field(1000, ge=0)
    """Models kept decoded in memory.  Beyond, the least recently used ones (idle for
    ``park_idle_s``) are snapshotted if they changed and *parked*: only what ``GET /models``
    shows stays in memory, the snapshot is decoded again on their next use (as after a
    restart).  0: never park.  See ``docs/deployment.md`` (many models)."""
    park_idle_s: float = Field(5.0, ge=0)
    """A model used (batch, flush, prediction) within this many seconds is not parked."""

    default_model: str = "default"
    create_default_model: bool = True

    # ---------------------------------------------------------------- guards (docs/defaults.md)
    max_budget: int = Field(100_000, ge=2)
    """The largest budget B a model may have (422 beyond)."""
    max_features: int = Field(2**20, ge=1)
    """The largest input dimension d: a sparse feature index must be below it (422 beyond)."""
    max_model_bytes: int = Field(256 * MIB, ge=1)
    """The largest estimated size of a model's arrays (SVs B x d x 8 bytes, shuffle buffer,
    run guard); checked before anything is allocated (422 beyond)."""
    label_run_window: int = Field(1000, ge=1)
    """A model warns (log and ``svmstream_single_label_runs_total``) when this many received
    examples in a row have one label while it has two or more classes."""

    # ---------------------------------------------------------------- challengers (docs/challengers.md)
    max_challengers: int = Field(4, ge=0, le=16)
    """Challengers a model may have besides its champion (``PUT /models``: ``challengers``;
    drift challengers use a free slot).  Each is a full model: its bytes count like the champion's."""
    promotion_alpha: float = Field(0.05, gt=0, lt=1)
    """Level of the sequential paired test that promotes a challenger: the chance that a model
    that is not better replaces the champion, before the next promotion, is at most this."""
    promotion_min_examples: int = Field(500, ge=1)
    """Paired examples a challenger needs before it may be promoted (whatever its evidence)."""
    drift_challenger_horizon: int = Field(20_000, ge=1)
    """Paired examples after which a drift challenger that has not won is retired."""
    drift_challenger_start: Literal["warm", "fresh", "both"] = "warm"
    """How drift challengers start: ``warm``, a copy of the champion at the detection that has
    learned the champion's buffered rows, keeps no buffer and restarts its schedule; ``fresh``,
    a new model with the champion's settings and no buffer; ``both`` (two slots), the two race
    (``docs/challengers.md``)."""
    challenger_window: int = Field(1000, ge=1)
    """Paired examples of the sliding window whose accuracies ``GET /models/{name}`` shows."""

    # ---------------------------------------------------------------- auth
    api_token: SecretStr | None = None
    """With a token set, mutating routes need ``Authorization: Bearer <token>``."""
    protect_reads: bool = False
    """Also require the token on /predict, /health, /metrics and GET /models."""

    # ---------------------------------------------------------------- metrics
    metrics_window: int = Field(10_000, ge=1)
    """Examples in the sliding window of the prequential (test-then-train) accuracy."""
    rate_window_s: float = Field(10.0, gt=0)
    """Seconds over which examples applied per second are averaged."""

    # ---------------------------------------------------------------- feedback (docs/feedback.md)
    feedback_ttl_s: float = Field(86_400.0, gt=0)
    """Seconds a remembered prediction (``/predict`` with ``remember``) can be labelled by ``/feedback``."""
    feedback_max_bytes: int = Field(256 * MIB, ge=1024)
    """Bytes the feedback store may hold; beyond, the oldest remembered predictions are evicted
    (``svmstream_feedback_evicted_total``).  Counted as the process's memory (``docs/feedback.md``)."""
    feedback_open_max_bytes: int | None = Field(None, ge=0)
    """Of ``feedback_max_bytes``, what tokenless ``remember`` may hold, all models together
    (default: a quarter); authenticated records have the rest, and tokenless ones never evict them."""
    feedback_open_model_bytes: int | None = Field(None, ge=0)
    """What tokenless ``remember`` may hold for one model (default: a sixteenth of
    ``feedback_max_bytes``)."""
    feedback_window: int = Field(1000, ge=1)
    """Labelled predictions in the sliding window of the served accuracy and log-loss."""

    # ---------------------------------------------------------------- replicas (docs/deployment.md)
    role: Literal["learner", "replica"] = "learner"
    """``learner``: learns, snapshots and (with ``redis_url``) publishes each snapshot for
    replicas; ``replica``: serves predictions only, following the learner through Redis."""
    advertise_url: str | None = None
    """The learner's URL as replicas should name it in their 409 answers (default
    ``http://{host}:{port}``)."""
    replica_poll_s: float = Field(1.0, gt=0, le=60)
    """How often a replica compares the published versions besides the announcements."""

    # ---------------------------------------------------------------- Redis streams
    redis_url: str | None = None
    """``redis://host:port/db``; unset: no stream ingestion (the embedded default)."""
    stream_models: str = "*"
    """Models that consume their stream: ``*`` (every model) or comma-separated names."""
    stream_key: str = "svmstream:{model}:examples"
    stream_dead_key: str = "svmstream:{model}:dead"
    stream_group: str = "svmstream:{model}"
    stream_consumer: str = "learner"
    stream_start_id: str = "0"
    """Where a newly created consumer group starts: ``0`` (whole stream) or ``$`` (new entries)."""
    stream_count: int = Field(1000, ge=1)
    """COUNT of XREADGROUP: the most entries per read, applied with one solver call (a
    clustered consumer's reads take at most 16 until one comes back full: docs/cluster.md)."""
    stream_block_ms: int = Field(500, ge=1)
    stream_snapshot_every: int = Field(50_000, ge=1)
    """Snapshot (and so acknowledge) a model after this many stream entries applied since its
    last snapshot, besides the periodic snapshots."""
    stream_trim: bool = True
    """XTRIM MINID the stream below the last acknowledged entry after each acknowledgement."""
    stream_trim_exact: bool = False
    """Exact trimming (``=``) instead of Redis' efficient approximate one (``~``)."""
    stream_dead_maxlen: int = Field(1_000_000, ge=1)
    """Approximate MAXLEN of each dead-letter stream."""
    stream_lease_s: float = Field(10.0, gt=0)
    """TTL of the per-model consumer lease key (single learning consumer across processes)."""
    stream_reconnect_max_s: float = Field(5.0, gt=0)
    """Cap of the exponential back-off between reconnection attempts."""
    stream_info_interval_s: float = Field(1.0, gt=0)
    """How often the consumer refreshes lag/pending (XINFO) for the metrics."""

    # ---------------------------------------------------------------- several learners (docs/cluster.md)
    cluster: bool = False
    """Several learner processes share one Redis and one snapshot directory: each model is
    owned by one of them (rendezvous hashing over the live members, a fenced lease per model).
    Off: the one learner owns every model (as without the setting)."""
    cluster_member: str | None = None
    """This learner's member name (default ``<hostname>-<pid>-<random>``, new at every start:
    a restarted process is a new member); unique per live process."""
    cluster_lease_s: float = Field(3.0, gt=0.2, le=600)
    """TTL of a member's heartbeat and of each model lease: a learner that stops renewing loses
    its models after this long; it stops learning them itself before (at 60 % of it)."""
    cluster_learn_route: Literal["append", "forward"] = "append"
    """``POST /learn`` for a model another learner owns: ``append`` its examples to the model's
    stream (``202``, the owner applies them), or ``forward`` the request to the owner, which
    answers ``200`` with the new version once it has applied it (appended instead when the owner
    cannot take it).  Measured against each other in ``benchmarks/bench_learn_route.py``."""
    cluster_forward_timeout_s: float = Field(10.0, gt=0, le=600)
    """How long the owner of a forwarded ``/learn`` waits for its consumer to apply it before it
    answers ``202`` (the entries are in the stream); the forwarding learner waits 5 s more."""

    # ---------------------------------------------------------------- batch jobs (docs/jobs.md)
    data_dir: Path | None = None
    """Directory whose files ``POST /jobs`` may name as ``data``/``test``; unset: server-side
    paths are refused and only uploads (``POST /uploads``) can be trained on."""
    jobs_dir: Path = Path("./jobs")
    """Uploaded files (``uploads/``) and job results in transit (``results/``)."""
    max_upload_bytes: int = Field(1024 * MIB, ge=1)
    """Largest accepted ``POST /uploads`` body (413 beyond)."""
    max_concurrent_jobs: int = Field(1, ge=1)
    """Worker processes running jobs at once; further jobs wait in a FIFO queue."""
    max_queued_jobs: int = Field(100, ge=0)
    job_start_method: str = Field("forkserver", pattern="^(forkserver|spawn)$")
    """How worker processes start (never ``fork``: the server has threads)."""
    job_cancel_grace_s: float = Field(0.5, gt=0)
    """After a cancel, seconds the worker gets to stop by itself before its process group is
    killed (0.5: with the ~0.2 s a kill and reap take on a loaded machine, a cancelled job is
    gone within a second either way)."""
    job_history: int = Field(200, ge=1)
    """Finished jobs kept in memory (``GET /jobs``)."""
    job_dcsvm_n_jobs: int | None = Field(None, ge=1)
    """Default ``n_jobs`` of DC-SVM jobs (pool processes of the worker); None: the estimator's
    default — all cores on machines with at least 4, in-process below (docs/dcsvm.md)."""
    dask_address: str | None = None
    """``dask.distributed`` scheduler (e.g. ``tcp://scheduler:8786``): batch and search jobs,
    and DC-SVM's sub-problems, run on that cluster; unset: local worker processes
    (docs/dask.md)."""

    # ---------------------------------------------------------------- bounds against abuse (docs/service.md)
    max_predict_body_bytes: int = Field(2 * MIB, ge=1)
    """Body limit of the read routes (``/predict``, ``/v2/models/*/infer``, ``/invocations``),
    checked from ``Content-Length`` before reading and while reading (413 beyond; the smaller
    of this and ``max_body_bytes`` applies)."""
    max_concurrent_bodies: int = Field(4, ge=1)
    """Request bodies over 64 KiB (or chunked) read and parsed at once, all routes together
    (503 with ``Retry-After`` beyond)."""
    limit_concurrency: int = Field(4096, ge=1)
    """Open connections (and running requests) beyond which uvicorn answers 503 (its
    ``limit_concurrency``; each connection is a file descriptor)."""
    timeout_keep_alive_s: float = Field(5.0, gt=0)
    """A connection idle this long after a response is closed (uvicorn's ``timeout_keep_alive``)."""
    header_timeout_s: float = Field(10.0, gt=0)
    """A request head (request line and headers) must be complete this many seconds after the
    connection opens or the request's first byte arrives: else 408 and the connection is closed."""
    max_header_bytes: int = Field(64 * 1024, ge=1024)
    """Largest request head (431 and close beyond; h11's ``h11_max_incomplete_event_size``)."""
    max_concurrent_body_bytes: int = Field(
        32 * MIB,
        ge=1,
        validation_alias=AliasChoices(
            "SVMSTREAM_MAX_CONCURRENT_BODY_BYTES", "SVMSTREAM_MAX_CONCURRENT_LEARN_BYTES"
        ),
    )
    """Sum of the request bodies over 64 KiB being read and parsed at once, all routes together
    (``/learn``, the read routes, ``/feedback``, ``PUT /models``, ...), each counted at its
    ``Content-Length`` (a chunked one at its route's limit): 503 with ``Retry-After`` beyond.  A
    body is never refused for being alone (one body up to its route's limit is read).  The
    former name ``SVMSTREAM_MAX_CONCURRENT_LEARN_BYTES`` is read too."""
    max_label_length: int = Field(256, ge=1)
    """Longest string label (characters) a model learns or declares (422 naming ``y[i]`` or
    ``classes[i]`` beyond); labels also count in ``max_model_bytes`` (160 bytes + their UTF-8 length)."""
    metrics_cache_s: float = Field(5.0, ge=0)
    """With more than ``metrics_cache_models`` models, ``/metrics`` answers with an exposition
    rendered at most this many seconds ago (0: render every scrape).  Concurrent scrapes
    always share one rendering."""
    metrics_cache_models: int = Field(200, ge=0)
    """Models beyond which ``/metrics`` renderings are reused for ``metrics_cache_s``."""
    max_models: int = Field(20_000, ge=1)
    """Models the server holds at most (422 for another one; bench_many_models runs 10,000)."""
    max_total_model_bytes: int = Field(64 * 1024 * MIB, ge=1)
    """Sum of all online models' size estimates (``max_model_bytes``'s estimate at each model's
    dimension, 1 while unknown, and its classes) beyond which a new model is refused (422), and a
    batch that would grow a model (a wider dimension, new classes) is refused (413).  The
    estimates count capacities (a full shuffle buffer, warm-up window ...): set it to the memory
    the service has."""
    job_max_k: int = Field(64, ge=2)
    """Largest DC-SVM ``k`` (clusters per level, k^levels sub-problems) a job may ask for (422 beyond)."""
    job_max_cache_mb: float = Field(2048.0, gt=0)
    """Largest DC-SVM ``cache_size`` (MB of kernel cache per sub-problem solver, per pool
    process) a job may ask for (422 beyond).  ``n_jobs`` is bounded by the machine's cores."""

    @field_validator(
        "data_dir",
        "job_dcsvm_n_jobs",
        "dask_address",
        "redis_url",
        "api_token",
        *(row.setting for row in HYPERPARAMETERS if row.nullable),
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        """An empty value, ``none`` or ``null`` (any case) of an optional setting means unset."""
        if isinstance(value, str) and value.strip().lower() in ("", "none", "null"):
            return None
        return value

    def model_defaults(self) -> dict[str, Any]:
        """Hyperparameters for models created without explicit values (JSON names)."""
        defaults = {row.json_name: getattr(self, row.setting) for row in HYPERPARAMETERS}
        if defaults["classes"] is not None:
            defaults["classes"] = list(defaults["classes"])
        return defaults

    def given_model_defaults(self) -> dict[str, Any]:
        """The model defaults that were set explicitly (environment, ``.env`` or ``serve`` flags;
        JSON names), which count as the user's settings where defaults are chosen from them."""
        return {
            row.json_name: getattr(self, row.setting)
            for row in HYPERPARAMETERS
            if row.setting in self.model_fields_set
        }

    def token(self) -> str | None:
        """The API token, or None when auth is off (an empty value counts as unset)."""
        if self.api_token is None:
            return None
        value = self.api_token.get_secret_value()
        return value or None

    def streamed(self, name: str) -> bool:
        """Whether model ``name`` consumes its Redis stream (see ``stream_models``)."""
        spec = self.stream_models.strip()
        if spec == "*":
            return True
        return name in {part.strip() for part in spec.split(",") if part.strip()}

    def stream_keys(self, name: str) -> tuple[str, str, str]:
        """``(stream key, dead-letter key, group)`` of model ``name``."""
        return (
            self.stream_key.format(model=name),
            self.stream_dead_key.format(model=name),
            self.stream_group.format(model=name),
        )
