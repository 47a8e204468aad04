"""One named model: its configuration, private estimator, single learner thread and
published view (:class:`ModelHandle`); the :class:`~svmstream.app.models.registry.Registry`
holds them by name.  See :mod:`svmstream.app.models.registry` for the concurrency model.

Learning a batch (:meth:`ModelHandle.submit`): the dimension rules (dense rows and a declared
``n_features`` fix ``d``; sparse rows widen a model up to the size guards of
:mod:`.limits`), one ``partial_fit`` on the learner thread, a finiteness check
(:func:`svmstream.app.models.view.check_finite`; a non-finite model is rolled back:
422 "numerical overflow"), the meters (prequential accuracy from ``last_margins_`` and
``last_y_``, rate, label runs), then a published copy.

Publishing does not copy the model (issue 14): the view holds the estimator's
``published_copy()`` — what predictions read, sharing what the learner never rewrites
(``svmstream.solvers.budgeted._publish``).  So the learner keeps no full copy per batch for
rollback either: a failed batch is undone by rebuilding the estimator from the last
*checkpoint* (its full state, detached) and replaying the batches applied since (the
*journal*; models are deterministic, so the replay gives the same estimator).  A checkpoint
is taken at every snapshot (:meth:`ModelHandle.capture_state`, which snapshots use: the
learner's state and the view of the same version, under the learner's lock) and whenever the
journal holds more than :data:`JOURNAL_MAX_BYTES` of input.

Lazy restore: a model restored at start-up from its snapshot file's header alone
(``restore=``, :meth:`svmstream.app.models.registry.Registry.restore`) has a first view built
from the header (version, classes, figures) whose estimator is a :class:`RestorePending`: the
file's arrays are decoded on the model's first use — a prediction through that view, a
batch, a flush, a snapshot (:meth:`ModelHandle.ensure_loaded`, under a lock: concurrent
first uses decode once) — and the decoded model then answers exactly as before the restart.

Parking (:meth:`ModelHandle.park`) is the way back: a decoded model whose newest snapshot holds
exactly its published version, with no task queued, drops its estimator and published copy
and becomes such a header-only model again (the registry decides which: the least recently
used beyond ``SVMSTREAM_MAX_LOADED_MODELS``, :meth:`svmstream.app.models.registry.Registry.park_idle`).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import threading
import time
import weakref
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
    NumericalOverflow,
    ServiceError,
)
from svmstream.app.ingest.features import conform
from svmstream.app.ingest.labels import LabelCodec, NewLabels, shared_codec
from svmstream.app.models.config import BATCH_ALGORITHMS, ModelConfig
from svmstream.app.models.factory import copy_estimator, estimator_from_state, make_estimator
from svmstream.app.models.learners import LearnerPool, default_pool
from svmstream.app.models.limits import check_width, estimate_bytes, max_width
from svmstream.app.models.meters import (
    LabelRunMeter,
    PrequentialWindow,
    RateMeter,
    RecentValues,
    correct_predictions,
)
from svmstream.app.models.snapshots import decode_snapshot
from svmstream.app.models.view import ModelView, check_finite, estimator_stats
from svmstream.app.models.warmup import note_waiting
from svmstream.app.settings import Settings

log = logging.getLogger("svmstream.registry")

#: Input bytes (X and y) of the batches the rollback journal keeps before a checkpoint (a
#: detached copy of the learner's full state) replaces them.
JOURNAL_MAX_BYTES = 64 << 20
#: Publications whose duration ``metrics()`` summarises (``publish_ms_p50``/``_p99``).
PUBLISH_TIMES = 256


def published(est):
    """What a view holds for ``est``: its ``published_copy()`` (online models), else a full
    copy (:func:`~svmstream.app.models.factory.copy_estimator`; batch-trained models, published
    once)."""
    if est is None:
        return None
    publish = getattr(est, "published_copy", None)
    return publish() if publish is not None else copy_estimator(est)


def detached_state(est) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``est.get_state()`` with every array and the metadata copied, so that the learner's
    later steps cannot change it (``get_state`` may return live arrays)."""
    arrays, meta = est.get_state()
    return {k: np.array(v, copy=True) for k, v in arrays.items()}, copy.deepcopy(meta)


def _path(path) -> Path:
    """``path`` as a Path, the same object if it is one (a Path costs ~0.3 KB per model)."""
    return path if isinstance(path, Path) else Path(path)


def _input_bytes(*arrays) -> int:
    total = 0
    for a in arrays:
        if sp.issparse(a):
            total += a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
        else:
            total += getattr(a, "nbytes", 0)
    return int(total)


class RestorePending:
    """The estimator of a lazily restored model's first view: any attribute read (e.g.
    ``decision_function``) decodes the model's snapshot (:meth:`ModelHandle.ensure_loaded`)
    and is answered by the decoded model's published copy.  It refers to its handle weakly (no
    reference cycle: the service freezes the collector's generations once started)."""

    __slots__ = ("_handle",)

    def __init__(self, handle: ModelHandle):
        self._handle = weakref.ref(handle)

    def __getattr__(self, name: str):
        handle = self._handle()
        if handle is None:
            raise ModelClosed("the model was deleted or replaced")
        return getattr(handle.loaded_view().estimator, name)


class ModelHandle:
    """One named model: configuration, private estimator, learner queue (on the threads of a
    :class:`~svmstream.app.models.learners.LearnerPool`: one writer at a time), current view."""

    # slots, not a __dict__ of ~35 entries: ~1.5 KB less per model (10,000 models in a service)
    __slots__ = (
        "name", "config", "settings", "codec", "max_pending", "follower_of", "_est", "_est_lock",
        "_checkpoint", "_journal", "_journal_bytes", "_n_features", "_fixed", "_lock", "_pending",
        "_closed", "_executor", "_restore", "_restore_lock", "view", "prequential", "rate",
        "label_runs", "overflows", "learn_failures", "snapshot_failures", "publish_seconds",
        "_drift_logged", "created_at", "stream_status", "saved_version", "last_snapshot_time",
        "last_snapshot_path", "last_used", "__weakref__",
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
    ):
        settings = settings if settings is not None else Settings()
        self.name = name
        self.config = config
        self.settings = settings
        # learned classes (restored from a snapshot: ``classes``) are committed by the learner
        # thread only; readers use the published view's codec
        if config.learns_classes:
            self.codec = shared_codec(classes or [], learn=True)
        else:
            self.codec = shared_codec(config.classes)
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
        # applied since, replayed to undo a failed batch (module docstring)
        self._est_lock = threading.Lock()  # held while the learner changes the estimator
        online = config.algorithm not in BATCH_ALGORITHMS
        keep = self._est is not None and online and follower_of is None
        # a checkpoint is a detached state, or the snapshot file holding it (no memory: a
        # restored model's, and each one after it is written, :meth:`checkpoint_saved`)
        self._checkpoint: tuple | Path | None = None
        if keep:
            self._checkpoint = (
                _path(checkpoint_path) if checkpoint_path is not None else detached_state(self._est)
            )
        self._journal: list[Callable[[Any], Any]] = []
        self._journal_bytes = 0
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
        if self._restore is not None:
            view_estimator = RestorePending(self)
        else:
            view_estimator = published(self._est) if estimator is not None else None
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
        )
        # learning metrics, written by the learner thread
        self.prequential = PrequentialWindow(settings.metrics_window)
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
    def loaded(self) -> bool:
        """False while a lazily restored model's snapshot is not decoded yet."""
        return self._restore is None

    def loaded_view(self) -> ModelView:
        """The current view, the model's snapshot decoded first if it was not yet."""
        self.ensure_loaded()
        return self.view

    def ensure_loaded(self) -> None:
        """Decode a lazily restored model's snapshot (once: concurrent callers wait for the
        first) and publish the decoded model: its view has the same version, labels and
        decisions as the header's; its state becomes the learner's, the file its checkpoint.

        Raises whatever the ``restore`` callable raises (the registry's: a snapshot that no
        longer decodes, after trying the older files, raises RuntimeError: a 500)."""
        if self._restore is None:
            return
        self.last_used = time.monotonic()
        with self._restore_lock:
            restore = self._restore
            if restore is None:
                return
            started = time.perf_counter()
            found = restore()
            est = found.estimator
            with self._est_lock:
                stub = self.view
                if found.version != stub.version:
                    log.warning(
                        "model %r: restored version %d instead of %d (the newer snapshot no longer decodes)",
                        self.name,
                        found.version,
                        stub.version,
                    )
                    self.saved_version = found.version
                self._est = est
                online = self.config.algorithm not in BATCH_ALGORITHMS
                if est is not None and online:
                    self._checkpoint = _path(found.path) if found.path is not None else detached_state(est)
                self.view = ModelView(
                    name=self.name,
                    config=self.config,
                    codec=stub.codec,
                    estimator=published(est),
                    version=found.version,
                    n_features=found.n_features if found.n_features is not None else stub.n_features,
                    stats=estimator_stats(est),
                    extra=dict(found.extra),
                    published_at=stub.published_at,
                    n_features_fixed=stub.n_features_fixed,
                )
                self._restore = None
            log.info(
                "model %r: decoded from %s on first use (%.1f ms)",
                self.name,
                found.path,
                (time.perf_counter() - started) * 1e3,
            )

    def park(self, decode: Callable[[Path], Any]) -> bool:
        """Give back the memory of a decoded model that its newest snapshot holds exactly: drop
        the estimator and its published copy and become a header-only model again, as a lazily
        restored one is: ``decode(path)`` (the registry's) decodes that snapshot file on the next
        use (:meth:`ensure_loaded`); the view keeps the version, labels and figures.  Returns
        whether it parked.

        Refused (False) unless the model is decoded, has learned, is not a replica's, has no
        batch or flush queued or running, and its last snapshot is of the published version
        (``saved_version``) and is its rollback checkpoint with no step applied since (online
        models): nothing learned since that file is ever dropped.  Under the decode lock, the
        learner's lock and the queue lock (in the order the learner takes them), so a batch
        submitted meanwhile finds either the loaded model or a parked one, which it decodes
        first.  The caller holds the model's snapshot lock (the file cannot change meanwhile).
        """
        if self.follower_of is not None or self._restore is not None:
            return False
        with self._restore_lock, self._est_lock, self._lock:
            view = self.view
            if self._restore is not None or self._pending or self._closed or view.estimator is None:
                return False
            if self.saved_version != view.version or self.last_snapshot_path is None:
                return False
            if self.config.algorithm not in BATCH_ALGORITHMS and not (
                isinstance(self._checkpoint, Path)
                and str(self._checkpoint) == self.last_snapshot_path
                and not self._journal
            ):
                return False
            # the checkpoint's Path (online models) is that file: one Path object per model
            path = self._checkpoint if isinstance(self._checkpoint, Path) else Path(self.last_snapshot_path)
            self._est = None
            self._restore = functools.partial(decode, path)
            self.view = dataclasses.replace(view, estimator=RestorePending(self))
        return True

    @property
    def n_features_fixed(self) -> bool:
        return self._fixed

    def growth_limit(self) -> int | None:
        """The widest sparse rows this model accepts now (None: its dimension is fixed)."""
        if self._fixed or self.config.algorithm in BATCH_ALGORITHMS:
            return None
        return max_width(self.config, self.settings)

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
        if self.config.algorithm in BATCH_ALGORITHMS:
            raise BatchModelReadOnly(
                f"model {self.name!r} was trained by a batch job ({self.config.algorithm}); "
                "it does not learn online (train a new one with POST /jobs)"
            )

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
    ) -> Future:
        """Queue a validated batch; returns a future resolving to the new :class:`ModelView`.

        ``sparse`` (default: whether X is a CSR matrix) says the rows came as sparse
        ``{index: value}`` objects: they may widen a model whose dimension is not fixed.
        ``new_labels``: labels the batch adds to a model that learns its classes (``y``
        holds their provisional indices); the learner commits them (:meth:`_commit_labels`).

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
            d = self._n_features
            if d is None or (sparse and not self._fixed and X.shape[1] > d):
                check_width(X, self.config, self.settings, sparse)
                d = max(int(X.shape[1]), d or 0)
            X = conform(X, d, declared, self.name)
            self._n_features = d
            self._fixed = self._fixed or not sparse or declared is not None
            note_waiting(f"learning a batch of model {self.name!r}")
            return self._queue(self._apply, X, y, extra, new_labels)

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

    def _commit_labels(self, y: np.ndarray, new: NewLabels | None) -> tuple[np.ndarray, LabelCodec]:
        """Learner thread: map provisional label indices to final ones and extend the codec.

        A label another batch added since this one was encoded keeps its index; the others
        are appended in order of first appearance.  Returns ``(y, codec)``; the handle's codec
        is replaced only once the batch is applied.

        Raises
        ------
        InvalidInput
            ``y[i]`` for the first example whose label would exceed ``max_classes`` or the
            size bound ``max_model_bytes``; nothing is changed.
        """
        codec = self.codec
        if new is None:
            return y, codec
        mapping = np.arange(new.base + len(new.labels), dtype=np.int64)
        added: list[Any] = []
        for j, label in enumerate(new.labels):
            k = codec.index_of(label)
            if k is None:
                k = len(codec.classes) + len(added)
                added.append(label)
            mapping[new.base + j] = k
        y = mapping[y]
        if not added:
            return y, codec
        n_classes = len(codec.classes) + len(added)
        limit = self.config.max_classes
        reason = None
        if n_classes > limit:
            reason = f"a new class would exceed max_classes = {limit} (the model has {len(codec.classes)})"
        elif self._n_features is not None:
            size = estimate_bytes(self.config, self._n_features, n_classes)
            if size > self.settings.max_model_bytes:
                reason = f"{n_classes} classes need an estimated {size / 1e6:,.1f} MB, over max_model_bytes"
                limit = len(codec.classes)
        if reason is not None:
            i = int(np.flatnonzero(y >= limit)[0]) if (y >= limit).any() else 0
            raise InvalidInput(f"y[{i}]: label {added[0]!r}: {reason}", field=f"y[{i}]", index=i)
        log.info("model %r: new class(es) %s learned from the data (%d classes)", self.name, added, n_classes)
        return y, codec.extended(added)

    def _apply(self, X, y: np.ndarray, extra: dict | None, new: NewLabels | None = None) -> ModelView:
        """Learner thread: commit new labels, one ``partial_fit`` call (after widening the
        model if a sparse batch grew ``d``, and adding learned classes), then publish a copy."""
        try:
            y, codec = self._commit_labels(y, new)
        except InvalidInput:
            with self._lock:
                self._pending -= 1
            raise

        def step(est):
            if hasattr(est, "n_features_in_") and X.shape[1] > est.n_features_in_:
                est.grow_features(X.shape[1])
            n_classes = max(2, len(codec.classes))  # a model that has seen one label is binary
            if not hasattr(est, "classes_"):
                est.partial_fit(X, y, classes=np.arange(n_classes))
                return X
            for k in range(len(est.classes_), n_classes):
                est.add_class(k)
            est.partial_fit(X, y)
            return X

        view = self._learn_step(step, extra, int(X.shape[0]), codec, _input_bytes(X, y))
        if self.label_runs.add(y):
            log.warning(
                "model %r: the last %d examples received all have label %r: the source looks sorted by "
                "label; the shuffle buffer and the run guard compensate, but shuffling the source is better",
                self.name,
                self.label_runs.window,
                self.codec.classes[self.label_runs.label],
            )
        return view

    def _load_for_task(self) -> None:
        """Learner thread: :meth:`ensure_loaded` before a queued task; if decoding fails the
        task ends, so its pending slot is released before the error propagates."""
        try:
            self.ensure_loaded()
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise

    def _flush(self) -> ModelView:
        """Learner thread: ``flush()`` the estimator (nothing to do before the first batch)."""
        self._load_for_task()
        if self._est is None:
            with self._lock:
                self._pending -= 1
            return self.view
        return self._learn_step(lambda est: est.flush() and None, None, 0)

    def _learn_step(
        self,
        step,
        extra: dict | None,
        n_received: int,
        codec: LabelCodec | None = None,
        n_bytes: int = 0,
    ) -> ModelView:
        """Run ``step(estimator)`` on the private estimator, check it stayed finite, update the
        meters and publish (with ``codec`` as the model's labels, when given); on any error
        rebuild the estimator as it was before the step (:meth:`_rebuild`)."""
        self._load_for_task()
        with self._est_lock:
            return self._learn_step_locked(step, extra, n_received, codec, n_bytes)

    def _learn_step_locked(self, step, extra, n_received, codec, n_bytes) -> ModelView:
        codec = self.codec if codec is None else codec
        try:
            est = self._est if self._est is not None else make_estimator(self.config)
            probe = step(est)
            self._est = est
            check_finite(est, probe)
            margins, learned = getattr(est, "last_margins_", None), getattr(est, "last_y_", None)
            if margins is not None and learned is not None and len(margins) == len(learned):
                self.prequential.add(correct_predictions(margins, np.asarray(learned, dtype=np.int64)))
            self.rate.add(n_received)
            self._count_drift(est)
            old = self.view
            self.codec = codec
            started = time.perf_counter()
            copy_for_view = published(est)
            self.publish_seconds.append(time.perf_counter() - started)
            view = ModelView(
                name=self.name,
                config=self.config,
                codec=codec,
                estimator=copy_for_view,
                version=old.version + 1,
                n_features=getattr(est, "n_features_in_", old.n_features),
                stats=estimator_stats(est),
                extra={**old.extra, **extra} if extra else old.extra,
                n_features_fixed=self._fixed,
            )
            self.view = view
            self._journal_add(step, n_bytes)
            return view
        except BaseException as exc:
            if isinstance(exc, NumericalOverflow):
                self.overflows += 1
                log.error("model %r: %s; model rolled back", self.name, exc)
            else:
                self.learn_failures += 1
                log.exception(
                    "model %r: learning a batch of %d examples failed; model rolled back",
                    self.name,
                    n_received,
                )
            self._est = self._rebuild()
            raise
        finally:
            with self._lock:
                self._pending -= 1

    def _journal_add(self, step, n_bytes: int) -> None:
        """Learner thread, after a published step: remember it for a rollback; past
        :data:`JOURNAL_MAX_BYTES` of input, take a checkpoint instead."""
        self._journal.append(step)
        self._journal_bytes += max(0, int(n_bytes))
        if self._journal_bytes > JOURNAL_MAX_BYTES:
            self._checkpoint = detached_state(self._est)
            self._journal, self._journal_bytes = [], 0

    def _rebuild(self):
        """The estimator as the current view published it: the checkpoint's state with the
        journal's steps replayed (None if nothing was learned)."""
        est = None
        if isinstance(self._checkpoint, Path):
            est = decode_snapshot(self._checkpoint.read_bytes(), self._checkpoint).estimator
        elif self._checkpoint is not None:
            est = estimator_from_state(*self._checkpoint)
        try:
            for step in self._journal:
                est = est if est is not None else make_estimator(self.config)
                step(est)
        except Exception:  # replaying steps that succeeded before: only a bug gets here
            log.exception("model %r: replaying the journal after a failed batch failed", self.name)
            raise
        return est

    def capture_state(self) -> tuple[ModelView, tuple[dict[str, np.ndarray], dict[str, Any]] | None]:
        """``(view, state)``: the current view and the learner's full state at that view's
        version — ``get_state()`` detached (independent arrays), or None before the first
        batch — taken together under the learner's lock (snapshots; the stream acknowledges
        the view's entries once that state is saved).  The state also becomes the rollback
        checkpoint.  Blocks while a batch is being applied.  A lazily restored model is decoded
        first (:meth:`ensure_loaded`)."""
        self.ensure_loaded()
        with self._est_lock:
            view = self.view
            if view.estimator is None or self._est is None:
                return view, None
            if self.config.algorithm in BATCH_ALGORITHMS:
                return view, view.estimator.get_state()
            state = detached_state(self._est)
            self._checkpoint, self._journal, self._journal_bytes = state, [], 0
            return view, state

    def checkpoint_saved(self, state, path) -> None:
        """After ``state`` (from :meth:`capture_state`) was written to ``path``: if it is still
        the checkpoint, keep the file instead of the arrays (a rollback reads it back)."""
        with self._est_lock:
            if self._checkpoint is state and state is not None:
                self._checkpoint = _path(path)

    def _count_drift(self, est) -> None:
        """Learner thread: log each new drift detection of the estimator with its example count."""
        drift = getattr(est, "drift_", None)
        if drift is None or drift.n_detections <= self._drift_logged:
            return
        log.warning(
            "model %r: concept drift detected at example %s (%d detections so far); on_drift=%s",
            self.name,
            drift.last_detection_at,
            drift.n_detections,
            self.config.on_drift,
        )
        self._drift_logged = drift.n_detections

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
            "prequential_accuracy": self.prequential.accuracy(),
            "prequential_window": self.prequential.count(),
            "prequential_window_size": self.prequential.size,
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

    def info(self) -> dict[str, Any]:
        """JSON-ready description (``GET /models/{name}``)."""
        view = self.view
        stats = {k: v for k, v in view.stats.items() if k != "statistics"}
        return {
            "name": self.name,
            "algorithm": self.config.algorithm,
            "budget": self.config.budget,
            "config": self.config.to_json(),
            "n_features": self._n_features,
            "n_features_fixed": self._fixed,
            "classes": view.codec.public_classes,
            "classes_learned": self.config.learns_classes,
            "fitted": view.estimator is not None,
            **stats,
            "version": view.version,
            "pending_batches": self._pending,
            "last_snapshot_time": self.last_snapshot_time,
            "last_snapshot_path": self.last_snapshot_path,
            "extra": view.extra,
            "statistics": view.stats.get("statistics", {}),
            "metrics": self.metrics(),
        }
