"""Named models: one learner per model (the single writer), published read-only views.

Concurrency model
-----------------
* Each :class:`ModelHandle` owns a private estimator that only its learner thread (a
  one-thread executor) touches.  :meth:`Registry.learn` may be called from any thread:
  under the handle's lock it checks the batch against the model's dimension and queues
  it, so batches are applied in submission order, one ``partial_fit`` call each (the
  numba step inside releases the GIL, the event loop keeps serving).
* After each applied batch the learner publishes an immutable
  :class:`~svmstream.app.models.view.ModelView` holding the estimator's
  ``published_copy()`` — what predictions read, sharing what the learner never rewrites,
  so publishing costs O(d · n_sv) for a dense SV pool and O(B) for a sparse one, never the
  buffers — and swaps the handle's ``view`` reference.  Predictions read the current view
  and never wait for the learner nor see a half-applied batch.
* Snapshots take the learner's full state and the view of the same version together
  (:meth:`ModelHandle.capture_state`, under the learner's lock: it waits for the batch being
  applied, never for the queue).
* If a batch fails, the private estimator is rebuilt as the current view published it:
  from the last checkpoint (taken at each snapshot) by replaying the batches applied since.

Restart (:meth:`Registry.restore`): each model is registered from its newest snapshot's header
(checksum verified, arrays not decoded) and decoded on first use
(:meth:`ModelHandle.ensure_loaded`), so ``/health`` answers after a header read per model.  A
model restored so and never used keeps ``saved_version == view.version``: no snapshot
rewrites it.

Errors (:mod:`svmstream.app.errors`): :class:`ModelNotFound`, :class:`ModelNotFitted`,
:class:`LearnerBusy`, :class:`ModelClosed`, :class:`BatchModelReadOnly`, and
:class:`InvalidInput` for a batch that does not fit the model.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp

from svmstream.app.errors import (
    ModelNotFitted,
    ModelNotFound,
)
from svmstream.app.ingest.features import conform
from svmstream.app.ingest.labels import NewLabels
from svmstream.app.ingest.named import rows_for_view
from svmstream.app.models.config import (
    ModelConfig,
    check_model_name,
    refuse_race_of_given_c,
    resolve_selection,
    task_defaults,
)
from svmstream.app.models.contested import new_counted_configs
from svmstream.app.models.factory import check_config
from svmstream.app.models.handle import ModelHandle
from svmstream.app.models.learners import LearnerPool
from svmstream.app.models.limits import (
    HeldTotal,
    check_capacity,
    check_config_limits,
    check_growth,
    race_bound,
)
from svmstream.app.models.parking import park_idle
from svmstream.app.models.restoring import decode_restored, restore_all
from svmstream.app.models.snapshots import SnapshotStore
from svmstream.app.models.view import ModelView
from svmstream.app.models.warmup import note_waiting, warm_for
from svmstream.app.settings import Settings
from svmstream.solvers._hyperparameters import default_algorithm

log = logging.getLogger("svmstream.registry")

__all__ = ["ModelHandle", "Registry"]

#: Threads writing snapshots at once in :meth:`Registry.snapshot_changed` (ext4: 300 small fsync'd files, 1.6 s one by one, 0.10 s by 4).
SNAPSHOT_WRITERS = 4


class Registry:
    """All named models of the service.

    Parameters
    ----------
    settings : Settings
        Defaults for new models and the learner queue bound.
    store : SnapshotStore or None
        Where snapshots go; ``None`` disables them.
    """

    def __init__(self, settings: Settings, store: SnapshotStore | None = None):
        self.settings = settings
        self.store = store
        self._models: dict[str, ModelHandle] = {}
        self.held_total = HeldTotal()  # the sum of the models' estimates the size checks read
        self._lock = threading.Lock()
        # one lock per model name: writes of one model's files (and their deletion) are serial,
        # different models are written in parallel (snapshot_changed)
        self._snap_locks: dict[str, threading.Lock] = {}
        # one object per distinct configuration in use (ModelConfig is frozen; see create)
        self._configs: weakref.WeakValueDictionary[str, ModelConfig] = weakref.WeakValueDictionary()
        self.snapshot_listeners: list[Callable[[ModelHandle, ModelView, str], None]] = []
        #: called after the snapshot listeners with the saved ``(arrays, meta)`` as well (read
        #: them, never modify them; the replication publisher encodes them for the replicas)
        self.snapshot_state_listeners: list[Callable[[ModelHandle, ModelView, str, dict, dict], None]] = []
        #: remembered predictions and their labels (:mod:`.feedback`; set by the app)
        self.feedback: Any = None
        # shared by all models
        self.learners = LearnerPool(settings.learner_threads, nice=settings.learner_nice)
        # park_idle: a model whose snapshot for parking failed is retried after this (monotonic)
        self._park_retry_at: dict[str, float] = {}

    # ------------------------------------------------------------------ lookup
    def __contains__(self, name: str) -> bool:
        return name in self._models

    def names(self) -> list[str]:
        return sorted(self._models)

    def handles(self) -> list[ModelHandle]:
        with self._lock:
            return list(self._models.values())

    def get(self, name: str) -> ModelHandle:
        """Raises :class:`ModelNotFound`."""
        handle = self._models.get(name)
        if handle is None:
            raise ModelNotFound(f"model {name!r} not found")
        return handle

    # ------------------------------------------------------------------ lifecycle
    def resolve_config(self, fields: dict[str, Any]) -> ModelConfig:
        """Fill the fields not given (JSON names) from the ``SVMSTREAM_DEFAULT_*`` settings; an
        ``algorithm`` given by neither is :func:`~svmstream.solvers._hyperparameters.default_algorithm`
        of what the request and the explicitly set settings give.

        Raises
        ------
        pydantic.ValidationError
        InvalidInput
            ``selection`` with a given C or lambda (:func:`refuse_race_of_given_c`).
        """
        given = {k: v for k, v in fields.items() if v is not None}
        merged = self.settings.model_defaults()
        explicit = self.settings.given_model_defaults()
        own = task_defaults(given, explicit)  # a regression / novelty model's own defaults
        merged.update(own)
        # the task's own defaults are not the user's settings: they do not stop a race (a
        # regression model with no settings races gamma); a task that never races says so
        fixed = {"selection": own["selection"]} if "selection" in own else {}
        merged.update(resolve_selection({**fixed, **given}, explicit))
        # the algorithm given, else a C without lambda runs BSCA (docs/defaults.md)
        merged["algorithm"] = own.get("algorithm") or default_algorithm({**explicit, **given})
        if merged.get("selection"):
            refuse_race_of_given_c({**explicit, **given})
            if merged.get("selection_bytes") is None:
                merged["selection_bytes"] = race_bound(self.settings, merged.get("max_classes"))
        return ModelConfig.model_validate(merged)

    def check_config(self, config: ModelConfig) -> None:
        """The size guards (:func:`svmstream.app.models.limits.check_config_limits`, raises
        :class:`InvalidInput` naming the field), then the estimator's own checks
        (:func:`svmstream.app.models.factory.check_config`, raises ValueError)."""
        check_config_limits(config, self.settings)
        check_config(config)

    def create(
        self, name: str, config: ModelConfig, *, snapshot: bool = True, **state: Any
    ) -> tuple[ModelHandle, bool]:
        """Create (or replace) model ``name``; returns ``(handle, replaced)``.

        ``state`` (``estimator``, ``version``, ``n_features``, ``n_features_fixed``, ``extra``) restores a saved
        model.  With ``snapshot`` the new model is written at once, so that a replaced
        model cannot come back from an older file after a restart.

        A model created anew (no ``generation`` in ``state``) gets a new identity (64 random
        bits) that its snapshots, history and remembered predictions carry.

        Raises
        ------
        ValueError
            On an invalid name (allowed: ``[A-Za-z0-9][A-Za-z0-9_.-]{0,63}``).
        """
        check_model_name(name)
        state.setdefault("generation", secrets.token_hex(8))
        extra = new_counted_configs(config, state.get("challengers"), self.settings)
        # max_models, max_total_model_bytes
        check_capacity(self._models, name, config, self.settings, extra, self.held_total)
        with self._lock:  # models of equal configurations share one (frozen) object: ~3 KB each
            config = self._configs.setdefault(config.model_dump_json(), config)
        warm_for(config)  # its kernel group, if the service's warm-up has not loaded it
        handle = ModelHandle(
            name,
            config,
            settings=self.settings,
            learners=self.learners,
            **state,
        )
        with self._lock:
            old = self._models.get(name)
            self._models[name] = handle
        if old is not None:
            old.close(wait=True)
            if snapshot and self.store is not None:  # a new model: the old one's history goes
                with self._snap_lock(name):
                    self.store.delete(name)
        if snapshot:
            self.snapshot(handle)
        return handle, old is not None

    def delete(self, name: str, *, keep_files: bool = False) -> None:
        """Remove model ``name`` and its snapshot files (``keep_files``: from this process only, a
        hand-off, ``docs/cluster.md``).  Raises :class:`ModelNotFound`."""
        with self._lock:
            handle = self._models.pop(name, None)
        if handle is None:
            raise ModelNotFound(f"model {name!r} not found")
        handle.close(wait=True)
        if self.store is not None and not keep_files:
            with self._snap_lock(name):
                self.store.delete(name)

    def close(self) -> None:
        """Stop every learner after its queued batches are applied."""
        for handle in self.handles():
            handle.close(wait=True)
        self.learners.shutdown()

    # ------------------------------------------------------------------ learn / predict
    def learn(
        self,
        name: str,
        X,
        y: np.ndarray,
        *,
        declared: int | None = None,
        extra: dict | None = None,
        sparse: bool | None = None,
        new_labels: NewLabels | None = None,
        weights: np.ndarray | None = None,
    ) -> Future:
        """Queue a batch for model ``name``; callable from any thread.

        Parameters
        ----------
        X : ndarray of shape (n, k), float64, or CSR matrix of shape (n, k)
            Finite features (from :func:`svmstream.app.ingest.examples.parse_examples` or
            :func:`svmstream.app.ingest.stream_entries.parse_stream_entries`).
        y : ndarray of shape (n,), int64
            Class indices (from :class:`svmstream.app.ingest.labels.LabelCodec`).
        declared : int, optional
            Dimension declared by the request.
        extra : dict, optional
            JSON metadata merged into the model's ``extra`` once the batch is applied
            (saved with the next snapshot), e.g. ``{"stream_id": "1700000000000-0"}``.
        sparse : bool, optional
            The rows came as sparse objects (default: X is CSR); they may widen the model.
        new_labels : NewLabels, optional
            Labels the batch adds to a model that learns its classes (from the codec).
        weights : ndarray of shape (n,), float64, optional
            The examples' importance weights, validated (None: every example weighs 1).

        Returns
        -------
        concurrent.futures.Future
            Resolves to the published :class:`ModelView` after the batch is applied.

        Raises
        ------
        ModelNotFound, InvalidInput, LearnerBusy, ModelClosed
        """
        return self.submit(
            self.get(name), X, y, declared=declared, extra=extra, sparse=sparse, new_labels=new_labels,
            weights=weights,
        )  # fmt: skip

    def submit(self, handle: ModelHandle, X, y: np.ndarray, **kwargs: Any) -> Future:
        """:meth:`ModelHandle.submit` (``kwargs``: its keywords) after the server-wide bound on a
        model that grows (:func:`svmstream.app.models.limits.check_growth`: 413 naming
        ``max_total_model_bytes``).  Raises what they raise."""
        if isinstance(X, list):  # rows of named fields: the handle's schema encodes them
            new, _, _ = kwargs.get("new_labels"), kwargs.pop("sparse", None), kwargs.pop("declared", None)
            check = lambda Xe: check_growth(
                self._models, handle, Xe, new, True, self.settings, self.held_total
            )  # noqa: E731
            return handle.submit_named(X, y, check=check, **kwargs)
        sparse = kwargs.get("sparse")
        sparse = sp.issparse(X) if sparse is None else bool(sparse)
        check_growth(
            self._models, handle, X, kwargs.get("new_labels"), sparse, self.settings, self.held_total
        )
        return handle.submit(X, y, **kwargs)

    def flush(self, name: str) -> Future:
        """Queue a flush of model ``name``: learn every pending example (warm-up window and
        shuffle buffer) now.  Returns a future of the published view.

        Raises ModelNotFound, BatchModelReadOnly, LearnerBusy, ModelClosed."""
        return self.get(name).submit_flush()

    def predict(self, name: str, X, declared: int | None = None, with_rows: bool = False):
        """Decision values of the current published view of ``name``.

        Returns
        -------
        (view, decision) with decision of shape (n,) (binary) or (n, K), float64; with
        ``with_rows`` ``(view, X, decision)``, X conformed to the model's dimension.

        Raises
        ------
        ModelNotFound, ModelNotFitted, ModelWarmingUp (409), InvalidInput
        """
        handle = self.get(name)
        handle.last_used = time.monotonic()
        view = handle.view
        if view.estimator is not None:
            note_waiting(f"a prediction of model {name!r}")
        if view.estimator is None:
            raise ModelNotFitted(f"model {name!r} has not learned from any example yet")
        X = conform(rows_for_view(view, X), view.n_features, declared, name)
        decision = view.decision_function(X)
        return (view, X, decision) if with_rows else (view, decision)

    # ------------------------------------------------------------------ snapshots
    def snapshot(self, handle: ModelHandle, *, force: bool = False) -> str | None:
        """Write a snapshot of ``handle``'s current view if it changed since the last one.

        Skipped when snapshots are disabled, or the handle was deleted or replaced.
        Returns the path written, or None.
        """
        if self.store is None:
            return None
        with self._snap_lock(handle.name):
            if self._models.get(handle.name) is not handle:
                return None
            if handle.view.version == handle.saved_version and not force:
                return None
            view, state = handle.capture_state()  # the learner's state at the view's version
            try:
                written = self.store.write(
                    view.name,
                    view.config,
                    state,
                    version=view.version,
                    n_features=view.n_features,
                    extra=view.extra,
                    n_features_fixed=view.n_features_fixed,
                    classes=view.codec.classes,
                    fields=handle.fields.get_state()[1] if handle.fields is not None else None,
                    stats=view.stats,
                    figures={"prequential_accuracy": handle.prequential.accuracy()},
                    generation=handle.generation,
                )
            except Exception:
                handle.snapshot_failures += 1  # svmstream_snapshot_failures_total
                raise
            path, saved_at = written.path, written.saved_at
            handle.saved_version = view.version
            handle.last_snapshot_time = saved_at
            handle.last_snapshot_path = str(path)
            handle.checkpoint_saved(state, path)  # the rollback checkpoint is now that file
            # listeners run under the lock: whoever then finds the view saved knows they ran
            # (they must be quick and must not call snapshot())
            for listener in list(self.snapshot_listeners):
                try:
                    listener(handle, view, str(path))
                except Exception:
                    log.exception("snapshot listener failed")
            for listener in list(self.snapshot_state_listeners):
                try:
                    listener(handle, view, str(path), written.arrays, written.meta)
                except Exception:
                    log.exception("snapshot listener failed")
        log.info(
            "model %r: snapshot %s (version %d, %d examples seen)",
            handle.name,
            path,
            view.version,
            view.stats["n_seen"],
        )
        return str(path)

    def _snap_lock(self, name: str) -> threading.Lock:
        """The snapshot lock of model ``name`` (created on first use)."""
        lock = self._snap_locks.get(name)
        if lock is None:
            with self._lock:
                lock = self._snap_locks.setdefault(name, threading.Lock())
        return lock

    def snapshot_changed(self) -> list[str]:
        """Snapshot every model whose view changed since its last snapshot (a model restored
        lazily and never used since has not: it is not decoded nor rewritten); returns the
        paths written.

        Models are written by up to :data:`SNAPSHOT_WRITERS` threads: a write is mostly two
        ``fsync`` calls (file and directory), which the file system commits together when
        they come at once (10,000 one-batch models at SIGTERM: see ``docs/deployment.md``)."""
        return self._snapshot_all([h for h in self.handles() if h.view.version != h.saved_version])

    def _snapshot_all(self, handles: list[ModelHandle]) -> list[str]:
        """:meth:`snapshot` of each handle (by up to :data:`SNAPSHOT_WRITERS` threads; a failure
        is logged); returns the paths written."""

        def one(handle: ModelHandle) -> str | None:
            try:
                return self.snapshot(handle)
            except Exception:
                log.exception("model %r: snapshot failed", handle.name)
                return None

        if len(handles) <= 1:
            paths = [one(h) for h in handles]
        else:
            with ThreadPoolExecutor(
                min(SNAPSHOT_WRITERS, len(handles)), thread_name_prefix="snapshot"
            ) as pool:
                paths = list(pool.map(one, handles))
        return [p for p in paths if p]

    # ------------------------------------------------------------------ parking
    def park_idle(self, now: float | None = None) -> int:
        """Park the least recently used idle decoded models (:func:`.parking.park_idle`)."""
        return park_idle(self, now)

    def install(self, found, *, follower_of: str | None = None) -> ModelHandle:
        """Create (or replace) the model of a restored snapshot (a
        :class:`~svmstream.app.models.snapshots.RestoredModel`): at start-up, and on a
        prediction replica each time its learner publishes a version (``follower_of``: the
        learner's URL; such a model refuses learning, 409).  Replacing swaps the model's
        handle at once; predictions in flight finish on the old view.

        A ``header_only`` model that holds an estimator (:meth:`SnapshotStore.load_newest_header`)
        is installed lazily: its file is decoded on first use."""
        lazy = found.header_only and found.fitted and follower_of is None and found.path is not None
        handle, _ = self.create(
            found.name,
            found.config,
            snapshot=False,
            estimator=found.estimator,
            version=found.version,
            n_features=found.n_features,
            n_features_fixed=found.n_features_fixed,
            extra=found.extra,
            classes=found.classes,
            fields=found.fields,
            follower_of=follower_of,
            owned=True,  # decoded for this model alone: no copy
            checkpoint_path=found.path if follower_of is None else None,
            restore=functools.partial(decode_restored, self.store, found.name, found.path) if lazy else None,
            stats=found.stats,
            challengers=(found.challengers, found.challenger_arrays),
            generation=found.generation,
        )
        handle.saved_version = found.version
        handle.last_snapshot_time = found.saved_at
        handle.last_snapshot_path = str(found.path) if found.path is not None else None
        return handle

    def restore(self) -> list[str]:
        """Register the newest valid snapshot of every model found in the store: from its
        header (decoded on first use), or decoded now for a file without saved figures
        (:func:`~svmstream.app.models.restoring.restore_all`)."""
        return restore_all(self)
