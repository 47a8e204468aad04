"""One named model: its configuration, private estimator, single learner thread and
published view (:class:`ModelHandle`); the :class:`~svmstream.app.models.registry.Registry`
holds them by name.  See :mod:`svmstream.app.models.registry` for the concurrency model.

Learning a batch (:meth:`ModelHandle.submit`): the dimension rules (dense rows and a declared
``n_features`` fix ``d``; sparse rows widen a model up to the size guards of
:mod:`.limits`), then the learner thread's work (:mod:`.learning`): one ``partial_fit``, a
finiteness check, the meters, a published copy.  A failed batch is undone from a checkpoint
and a journal (:mod:`.rollback`); a model restored from a snapshot's header is decoded on
first use and an idle one can be parked again (:mod:`.restoring`).  The handle itself holds
the state (one ``__slots__`` layout; the three mixins add methods only), queues the tasks
and describes the model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import (
    BatchModelReadOnly,
    InvalidInput,
    LearnerBusy,
    ModelClosed,
    ServiceError,
)
from svmstream.app.ingest.features import conform
from svmstream.app.ingest.labels import NewLabels
from svmstream.app.ingest.named import encode_named, named_schema, refuse_mixed
from svmstream.app.ingest.targets import target_codec
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.contested import Challenged, challenger_set
from svmstream.app.models.copies import published
from svmstream.app.models.factory import copy_estimator
from svmstream.app.models.kind import model_kind
from svmstream.app.models.learners import LearnerPool, default_pool
from svmstream.app.models.learning import Learning
from svmstream.app.models.limits import check_width, max_width
from svmstream.app.models.meters import LabelRunMeter, RateMeter, RecentValues
from svmstream.app.models.restoring import LazyRestore, RestorePending
from svmstream.app.models.rollback import Rollback, first_checkpoint
from svmstream.app.models.task_outputs import output_of
from svmstream.app.models.view import ModelView, estimator_stats
from svmstream.app.settings import Settings

log = logging.getLogger("svmstream.registry")

#: Publications whose duration ``metrics()`` summarises (``publish_ms_p50``/``_p99``).
PUBLISH_TIMES = 256


class ModelHandle(LazyRestore, Learning, Rollback, Challenged):
    """One named model: configuration, private estimator, learner queue (on the threads of a
    :class:`~svmstream.app.models.learners.LearnerPool`: one writer at a time), current view.
    ``generation``: the model's identity, made when ``PUT`` created it (kept by its snapshots,
    restarts, rollbacks and replicas; None: restored from a file written before it existed)."""

    # slots, not a __dict__ of ~35 entries: ~1.5 KB less per model (10,000 models in a service)
    __slots__ = (
        "name", "config", "settings", "codec", "max_pending", "follower_of", "_est", "_est_lock",
        "_checkpoint", "_journal", "_journal_bytes", "_n_features", "_fixed", "_lock", "_pending",
        "_closed", "_executor", "_restore", "_restore_lock", "view", "prequential", "rate",
        "label_runs", "overflows", "learn_failures", "snapshot_failures", "publish_seconds",
        "_drift_logged", "created_at", "stream_status", "saved_version", "last_snapshot_time",
        "last_snapshot_path", "last_used", "challengers", "fields", "generation", "__weakref__",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        config: ModelConfig,
        *,
        estimator: Any | None = None,
        version: int = 0,
        n_features: int | None = None,
        n_features_fixed: bool | None = None,
        extra: dict[str, Any] | None = None,
        settings: Settings | None = None,
        classes: list[Any] | None = None,
        learners: LearnerPool | None = None,
        follower_of: str | None = None,
        owned: bool = False,
        checkpoint_path: Path | None = None,
        restore: Callable[[], Any] | None = None,
        stats: dict[str, Any] | None = None,
        challengers: Any = None,
        fields: dict[str, Any] | None = None,
        generation: str | None = None,
    ):
        settings = settings if settings is not None else Settings()
        self.name, self.config, self.generation = name, config, generation
        self.settings = settings
        # learned classes (restored from a snapshot: ``classes``) are committed by the learner
        # thread only; readers use the published view's codec
        self.codec = target_codec(config, classes)
        self.max_pending = settings.max_pending_batches
        # a prediction replica's model (follower_of: its learner's URL) never learns: no
        # private copy, no checkpoint; learning is refused naming the learner
        self.follower_of = follower_of
        # ``owned``: nobody else holds ``estimator`` (decoded from a snapshot): no copy needed
        if follower_of is not None or owned:
            self._est = estimator
        else:
            self._est = copy_estimator(estimator) if estimator is not None else None
        # rollback: the state of the last checkpoint (None: a fresh estimator) and the steps
        # applied since, replayed to undo a failed batch (:mod:`.rollback`)
        self._est_lock = threading.Lock()  # held while the learner changes the estimator
        online = config.learns_online
        keep = self._est is not None and online and follower_of is None
        # a checkpoint is a detached state, or the snapshot file holding it (no memory: a
        # restored model's, and each one after it is written, :meth:`checkpoint_saved`)
        self._checkpoint: tuple | Path | None = None
        if keep:
            self._checkpoint = first_checkpoint(self._est, checkpoint_path)
        # challengers (:mod:`.challengers`): a ChallengerSet, or a restored model's (saved, arrays)
        self.challengers = challenger_set(challengers, config, settings, follower_of is not None)
        self._journal, self._journal_bytes = [], 0  # list[Callable[[Any], Any]], bytes
        self._n_features = n_features if n_features is not None else config.n_features
        # sparse input widens a model until dense rows or a declared n_features fix d
        self._fixed = bool(config.n_features is not None if n_features_fixed is None else n_features_fixed)
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        # the model's ordered task queue on the shared learner threads (no thread of its own)
        self._executor = (learners if learners is not None else default_pool()).queue(name)
        # lazy restore: ``restore()`` decodes the snapshot (a RestoredModel) on first use
        self._restore = restore if estimator is None else None
        self._restore_lock = threading.Lock()
        view_estimator = published(self._est) if estimator is not None else None
        view_estimator = RestorePending(self) if self._restore is not None else view_estimator
        self.fields = named_schema(config, fields)
        self.view = ModelView(
            name=name,
            config=config,
            codec=self.codec,
            estimator=view_estimator,
            version=version,
            n_features=self._n_features,
            stats=dict(stats) if stats is not None else estimator_stats(estimator),
            extra=dict(extra or {}),
            n_features_fixed=self._fixed,
            challengers=self.challengers.info() if self.challengers is not None else None,
            fields=self.fields,
        )
        self._init_meters(settings)

    def _init_meters(self, settings: Settings) -> None:
        """The learning meters and the snapshot bookkeeping of a new handle (after its view)."""
        # learning metrics, written by the learner thread
        # the task's prequential meter (accuracy; MAE/RMSE; outlier rate: task_outputs.py)
        self.prequential = output_of(self.config).meter(settings.metrics_window)
        self.rate = RateMeter(settings.rate_window_s)
        self.label_runs = LabelRunMeter(settings.label_run_window)
        self.overflows = 0
        self.learn_failures = 0  # rolled-back batches other than overflows (/metrics)
        self.snapshot_failures = 0  # written by Registry.snapshot (/metrics)
        self.publish_seconds = RecentValues(PUBLISH_TIMES)  # the cost of publishing
        self._drift_logged = int(self.view.stats["drift"]["detections"])
        self.created_at = time.time()
        # set by a stream consumer: () -> dict of stream figures for info() and /metrics
        self.stream_status: Callable[[], dict[str, Any]] | None = None
        # snapshot bookkeeping (written by Registry.snapshot under its lock)
        self.saved_version = -1
        self.last_snapshot_time: float | None = None
        self.last_snapshot_path: str | None = None
        # time.monotonic() of the last batch, flush, prediction or decode: parking takes the
        # least recently used models first
        self.last_used = time.monotonic()

    @property
    def n_features(self) -> int | None:
        return self._n_features

    @property
    def n_features_fixed(self) -> bool:
        return self._fixed

    def growth_limit(self) -> int | None:
        """The widest sparse rows this model accepts now (None: its dimension is fixed)."""
        if self._fixed or not self.config.learns_online:
            return None
        return max_width(self.config, self.settings, self.counted_configs())

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def closed(self) -> bool:
        return self._closed

    def _refuse_if_batch_trained(self) -> None:
        if self.follower_of is not None:
            raise ServiceError(
                f"model {self.name!r} is served by a prediction replica; send learning to the learner "
                f"at {self.follower_of}",
                field="model",
                status=409,
            )
        if not self.config.learns_online:
            raise BatchModelReadOnly(
                f"model {self.name!r} was trained by a batch job ({self.config.algorithm}); "
                "it does not learn online (train a new one with POST /jobs)"
            )

    def check_learns(self) -> None:
        """Raise what :meth:`submit` raises for a model that does not learn here (a replica's
        copy, a batch-trained model), without queueing anything."""
        self._refuse_if_batch_trained()

    def _check_can_queue(self) -> None:
        """Under the lock: raise ModelClosed or LearnerBusy when nothing may be queued now."""
        if self._closed:
            raise ModelClosed(f"model {self.name!r} was deleted or replaced")
        if self._pending >= self.max_pending:
            raise LearnerBusy(f"model {self.name!r} has {self._pending} batches queued; retry later")

    def submit(
        self,
        X,
        y: np.ndarray,
        *,
        declared: int | None = None,
        extra: dict | None = None,
        sparse: bool | None = None,
        new_labels: NewLabels | None = None,
        weights: np.ndarray | None = None,
        schema_rows: bool = False,
    ) -> Future:
        """Queue a validated batch; returns a future resolving to the new :class:`ModelView`.

        ``sparse`` (default: whether X is a CSR matrix) says the rows came as sparse
        ``{index: value}`` objects: they may widen a model whose dimension is not fixed.
        ``new_labels``: labels the batch adds to a model that learns its classes (``y``
        holds their provisional indices); the learner commits them (:meth:`_commit_labels`).
        ``weights``: (n,) float64 importance weights, validated (:mod:`svmstream.app.ingest.weights`;
        None: every example weighs 1).  ``schema_rows``: X holds rows of a model of named fields
        already in its schema's columns (stored by ``/predict`` with ``remember``, learned by
        ``/feedback``), not positional rows.

        Raises
        ------
        InvalidInput
            Dimension mismatch (dense rows and a declared ``n_features`` fix ``d``), or a
            dimension over ``max_features`` / ``max_model_bytes`` (see :mod:`.limits`).
        LearnerBusy, ModelClosed (also BatchModelReadOnly for a batch-trained model)
        """
        self._refuse_if_batch_trained()
        if y.shape != (X.shape[0],):
            raise InvalidInput(f"y: has {y.shape[0]} labels for {X.shape[0]} examples in X", field="y")
        sparse = sp.issparse(X) if sparse is None else bool(sparse)
        self.last_used = time.monotonic()
        with self._lock:
            self._check_can_queue()
            refuse_mixed(self, named=schema_rows and self.fields is not None)
            return self._submit_locked(X, y, declared, extra, sparse, new_labels, weights)

    def submit_named(
        self,
        rows: list,
        y: np.ndarray,
        *,
        extra: dict | None = None,
        new_labels=None,
        check=None,
        weights=None,
    ) -> Future:
        """:meth:`submit` for rows of named fields: encoded by the model's schema under the
        handle's lock (batches take their new columns in queue order), the new columns kept
        only when the batch is queued.  ``check(X)``: a further refusal (the server-wide size
        bound).  Raises what :meth:`submit` raises, and InvalidInput naming ``X[i].field``."""
        self._refuse_if_batch_trained()
        if y.shape != (len(rows),):
            raise InvalidInput(f"y: has {y.shape[0]} labels for {len(rows)} examples in X", field="y")
        self.last_used = time.monotonic()
        with self._lock:
            self._check_can_queue()
            refuse_mixed(self, named=True)
            X, commit, schema_bytes = encode_named(self, rows)
            if check is not None:
                check(X)
            future = self._submit_locked(X, y, None, extra, True, new_labels, weights, schema_bytes)
            commit()
            return future

    def _submit_locked(self, X, y, declared, extra, sparse, new_labels, weights=None, reserved=0) -> Future:
        """Under the lock: the dimension rules (``reserved``: bytes of the schema of named fields,
        counted in ``max_model_bytes``), then the learner's task."""
        d = self._n_features
        if d is None or (sparse and not self._fixed and X.shape[1] > d):
            check_width(X, self.config, self.settings, sparse, self.counted_configs(), reserved)
            d = max(int(X.shape[1]), d or 0)
        X = conform(X, d, declared, self.name)
        self._n_features = d
        self._fixed = self._fixed or not sparse or declared is not None
        return self._queue(self._apply, X, y, extra, new_labels, weights)

    def submit_flush(self) -> Future:
        """Queue a flush (learn every pending example now); returns a future of the new view.

        Raises BatchModelReadOnly, LearnerBusy, ModelClosed."""
        self._refuse_if_batch_trained()
        self.last_used = time.monotonic()
        with self._lock:
            self._check_can_queue()
            return self._queue(self._flush)

    def _queue(self, fn, *args) -> Future:
        """Under the lock: count a pending batch and hand ``fn`` to the learner."""
        self._pending += 1
        try:
            return self._executor.submit(fn, *args)
        except RuntimeError as exc:  # executor shut down
            self._pending -= 1
            raise ModelClosed(f"model {self.name!r} was deleted or replaced") from exc

    def close(self, wait: bool = True) -> None:
        """Refuse new batches; with ``wait``, block until queued batches are applied."""
        with self._lock:
            self._closed = True
        self._executor.shutdown(wait=wait)

    def metrics(self) -> dict[str, Any]:
        """Learning figures that change only when the model or its stream does (so that
        two reads of an idle model are equal): examples applied, examples/s over the
        window ending at the last applied batch, its unix time, prequential accuracy, and
        the stream consumer's status.  The live, time-dependent figures (current rate,
        snapshot age) are in ``/metrics``."""
        view = self.view
        out: dict[str, Any] = {
            "examples_applied": view.stats["n_seen"],
            "applied_per_s": self.rate.rate_at_last(),
            "last_applied_at": view.published_at if view.version else None,
            **self.prequential.figures(),  # accuracy; MAE and RMSE; outlier rate (task_outputs.py)
            "prequential_window": self.prequential.count(),
            "prequential_window_size": self.prequential.size,
            # the window counts examples of weight > 0, each once: never weighted (docs/weights.md)
            "prequential_weighted": False,
            "single_label_run": self.label_runs.length,
            "single_label_runs": self.label_runs.detections,
            "numerical_overflows": self.overflows,
            **self._publish_figures(),
        }
        if self.stream_status is not None:
            try:
                out["stream"] = self.stream_status()
            except Exception:  # never let a status read break GET /models
                log.exception("model %r: stream status failed", self.name)
        return out

    def _publish_figures(self) -> dict[str, float | None]:
        """Median and 99th percentile (ms) of the time the last publications took to make the
        view's copy (``published_copy``), None before the first."""
        times = np.fromiter(self.publish_seconds, dtype=np.float64)
        if times.shape[0] == 0:
            return {"publish_ms_p50": None, "publish_ms_p99": None}
        p50, p99 = np.percentile(times, [50, 99]) * 1e3
        return {"publish_ms_p50": float(p50), "publish_ms_p99": float(p99)}

    def examples(
        self, status: dict[str, Any] | None | object = ..., view: ModelView | None = None
    ) -> dict[str, int]:
        """The model's example account: ``received = learned + pending + refused``.  Learned and
        pending come from the model's state (they survive restarts); refused counts the stream
        entries this process dead-lettered (bad entries, batches the learner refused).  A
        refused HTTP request changes nothing and is not received.  ``status``: the stream status
        a caller already read (None: no stream); by default it is read here.  ``view``: the
        version to describe (default the current one)."""
        view = self.view if view is None else view
        counts = dict(view.stats.get("examples") or {"received": 0, "learned": 0, "pending": 0})
        if status is ...:
            status = self.stream_status() if self.stream_status is not None else None
        refused = int(status.get("dead_letters", 0)) if status else 0
        counts["received"] += refused
        counts["refused"] = refused
        return counts

    def info(self) -> dict[str, Any]:
        """JSON-ready description (``GET /models/{name}``)."""
        view = self.view
        stats = {k: v for k, v in view.stats.items() if k != "statistics"}
        # one version throughout: the learner may publish meanwhile
        stats["examples"] = self.examples(view=view)
        return {
            "name": self.name,
            "task": view.config.task,
            "algorithm": view.config.algorithm,
            "budget": view.config.budget,
            "config": view.config.to_json(),
            "lambda_reason": view.config.lambda_reason,
            "algorithm_reason": view.config.algorithm_reason,
            "kind": model_kind(view.config, view.stats),
            "n_features": self._n_features,
            "n_features_fixed": self._fixed,
            "classes": view.codec.public_classes,
            "classes_learned": view.config.learns_classes,
            "fields": view.fields.info() if view.fields is not None else None,
            "fitted": view.estimator is not None,
            **stats,
            "version": view.version,
            "pending_batches": self._pending,
            "last_snapshot_time": self.last_snapshot_time,
            "last_snapshot_path": self.last_snapshot_path,
            "extra": view.extra,
            "statistics": view.stats.get("statistics", {}),
            # the service's meters, and the model's own figures (a novelty model's threshold and
            # false-alarm rate, a regressor's recent errors and 90 % half-width; none of a classifier)
            "metrics": {**view.stats.get("metrics", {}), **self.metrics()},
            **self.challengers_info(view),
        }
