"""Lazy restore and parking of a :class:`~svmstream.app.models.handle.ModelHandle`.

Lazy restore: a model restored at start-up from its snapshot file's header alone
(``restore=``, :meth:`svmstream.app.models.registry.Registry.restore`) has a first view built
from the header (version, classes, figures) whose estimator is a :class:`RestorePending`: the
file's arrays are decoded on the model's first use — a prediction through that view, a
batch, a flush, a snapshot (:meth:`LazyRestore.ensure_loaded`, under a lock: concurrent
first uses decode once) — and the decoded model then answers exactly as before the restart.

Parking (:meth:`LazyRestore.park`) is the way back: a decoded model whose newest snapshot holds
exactly its published version, with no task queued, drops its estimator and published copy
and becomes such a header-only model again (the registry decides which: the least recently
used beyond ``SVMSTREAM_MAX_LOADED_MODELS``, :meth:`svmstream.app.models.registry.Registry.park_idle`).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from svmstream.app.errors import ModelClosed
from svmstream.app.models.config import MODEL_NAME_RE
from svmstream.app.models.contested import challenger_set
from svmstream.app.models.copies import as_path, detached_state, published
from svmstream.app.models.view import ModelView
from svmstream.solvers.persistence import CorruptStateError

if TYPE_CHECKING:
    from svmstream.app.models.handle import ModelHandle

log = logging.getLogger("svmstream.registry")


class RestorePending:
    """The estimator of a lazily restored model's first view: each method of the contract
    (:class:`~svmstream.solvers.contract.Served`: predictions, the report, the finiteness check,
    the state) decodes the model's snapshot (:meth:`LazyRestore.ensure_loaded`) and is answered
    by the decoded model's published copy.  It refers to its handle weakly (no reference cycle:
    the service freezes the collector's generations once started)."""

    __slots__ = ("_handle",)

    def __init__(self, handle: ModelHandle):
        self._handle = weakref.ref(handle)

    def _loaded(self):
        """The decoded model's published copy (ModelClosed once the model is gone)."""
        handle = self._handle()
        if handle is None:
            raise ModelClosed("the model was deleted or replaced")
        return handle.loaded_view().estimator

    def decision_function(self, X):
        return self._loaded().decision_function(X)

    def predict(self, X):
        return self._loaded().predict(X)

    def predict_interval(self, X, level):
        """A regressor's intervals (the task's own prediction, :mod:`.task_outputs`)."""
        return self._loaded().predict_interval(X, level)

    def score_samples(self, X):
        """A novelty model's anomaly scores (the task's own prediction, :mod:`.task_outputs`)."""
        return self._loaded().score_samples(X)

    @property
    def predict_proba(self):
        """The decoded copy's ``predict_proba`` (AttributeError for a model without probabilities)."""
        return self._loaded().predict_proba

    def report(self):
        return self._loaded().report()

    def nonfinite(self, X=None):
        return self._loaded().nonfinite(X)

    def fitted(self) -> bool:
        return self._loaded().fitted()

    def input_width(self):
        return self._loaded().input_width()

    def drift(self):
        return self._loaded().drift()

    def published_copy(self):
        return self._loaded().published_copy()

    def get_state(self):
        return self._loaded().get_state()


class LazyRestore:
    """The decode-on-first-use and parking methods of
    :class:`~svmstream.app.models.handle.ModelHandle` (which declares the slots they use:
    ``_restore``, ``_restore_lock``, ``_est``, ``_est_lock``, ``_lock``, ``_checkpoint``,
    ``_journal``, ``view``, ...)."""

    __slots__ = ()

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
            with self._est_lock:
                self._install_restored(found)
            log.info(
                "model %r: decoded from %s on first use (%.1f ms)",
                self.name,
                found.path,
                (time.perf_counter() - started) * 1e3,
            )

    def _install_restored(self, found: Any) -> None:
        """Under the learner's lock: make the decoded model ``found`` (a RestoredModel) the
        learner's estimator and publish it with the header view's labels."""
        est = found.estimator
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
        if found.challengers:
            self.challengers = challenger_set((found.challengers, found.challenger_arrays), self.config,
                                              self.settings, False)  # fmt: skip
        online = self.config.learns_online
        if est is not None and online:
            self._checkpoint = as_path(found.path) if found.path is not None else detached_state(est)
        self.view = ModelView(
            name=self.name,
            config=self.config,
            codec=stub.codec,
            estimator=published(est),
            version=found.version,
            n_features=found.n_features if found.n_features is not None else stub.n_features,
            stats=self._view_stats(est),
            extra=dict(found.extra),
            published_at=stub.published_at,
            n_features_fixed=stub.n_features_fixed,
            challengers=self.challengers.info() if self.challengers is not None else None,
            fields=self.fields,
        )
        self._restore = None

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
            if self.config.learns_online and not (
                isinstance(self._checkpoint, Path)
                and str(self._checkpoint) == self.last_snapshot_path
                and not self._journal
            ):
                return False
            # the checkpoint's Path (online models) is that file: one Path object per model
            path = self._checkpoint if isinstance(self._checkpoint, Path) else Path(self.last_snapshot_path)
            self._est = None
            if self.challengers is not None:  # described by the header; decoded with the champion
                self.challengers = self.challengers.parked_copy()
            self._restore = functools.partial(decode, path)
            self.view = dataclasses.replace(view, estimator=RestorePending(self))
        return True


def decode_restored(store, name: str, path):
    """Decode the snapshot a lazily restored model was registered from (its first use), read
    from ``store`` (a :class:`~svmstream.app.models.snapshots.SnapshotStore`).  If it no longer decodes (its header and checksum were sound at start-up), the newest
    older file that does is used.  Raises RuntimeError when none does."""
    try:
        return store.read(path)
    except CorruptStateError as exc:
        log.error("model %r: snapshot %s does not decode: %s; trying older files", name, path, exc)
    for _, older in store.files(name):
        if older == path:
            continue
        try:
            found = store.read(older)
        except CorruptStateError as exc:
            log.warning("skipping snapshot %s: %s", older, exc)
            continue
        if found.name == name:
            return found
    raise RuntimeError(f"model {name!r}: no snapshot of it decodes any more")


def restore_all(registry) -> list[str]:
    """Register in ``registry`` the newest valid snapshot of every model found in its store
    (:meth:`Registry.restore`); returns the names restored."""
    if registry.store is None:
        return []
    # the cyclic collector would rescan the growing registry again and again while
    # thousands of handles are created (10,000 models: 79 -> 33 us per install measured):
    # it stays off for the loop (everything built here lives as long as its model)
    collecting = gc.isenabled()
    gc.disable()
    try:
        listing = registry.store.listing(clean=True).items()
        restored = [name for name, files in listing if _restore_one(registry, name, files)]
    finally:
        if collecting:
            gc.enable()
    lazy = sum(1 for name in restored if not registry.get(name).loaded)
    log.info("restored %d models (%d to be decoded on first use)", len(restored), lazy)
    return restored


def _restore_one(registry, name: str, files) -> bool:
    """Install the newest valid snapshot among ``files`` of model ``name``; False if none."""
    if not MODEL_NAME_RE.fullmatch(name):
        return False
    found = registry.store.load_newest_header(name, files)
    if found is None:
        log.error("model %r: no valid snapshot in %s; not restored", name, registry.store.model_dir(name))
        return False
    handle = registry.install(found)
    log.info(
        "model %r: restored from %s (version %d, %d examples seen%s)",
        name,
        found.path,
        found.version,
        handle.view.stats["n_seen"],
        "" if handle.loaded else "; decoded on first use",
    )
    return True
