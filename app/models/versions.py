"""Versions of a model: the history listed, a version pinned for predictions, a rollback.

A *version* is a snapshot file of the model (:mod:`.history` decides which are kept); its
number is the header's ``version`` (batches applied: the ``model_version`` predictions
answer, monotonic across restarts and rollbacks).  Only snapshotted versions are in the
history: a version published between two snapshots is not (``docs/versions.md``).

* :meth:`Versions.listing` — ``GET /models/{name}/versions``: every kept version with its time,
  examples, prequential accuracy, size and why it is kept, read from the headers (cached by
  file: files never change);
* :meth:`Versions.view` — the :class:`~.view.ModelView` of a version for ``POST /predict
  {"version": v}`` and the Open Inference Protocol's versions routes: the live view when it is
  that version, else its serving state (:mod:`.pinned`: no learning rows, decoded once however
  many ask, within ``max_pinned_bytes`` server-wide and ``max_pinned_versions``; least recently
  used dropped, decoded again on the next use; a 503 with ``Retry-After`` while another
  version is being decoded);
* :meth:`Versions.rollback` — ``POST /models/{name}/rollback``: version v becomes the live model
  as a new version (:mod:`.rollback_task`).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from svmstream.app.errors import AskTheLearner, ModelNotFitted, ModelNotFound, ServiceError
from svmstream.app.ingest.features import conform
from svmstream.app.ingest.labels import shared_codec
from svmstream.app.ingest.named import named_schema, rows_for_view
from svmstream.app.models.contested import challenger_set
from svmstream.app.models.copies import detached_state, published
from svmstream.app.models.history import add_marks, read_marks, reasons
from svmstream.app.models.pinned import PinnedCache
from svmstream.app.models.serving import read_serving
from svmstream.app.models.snapshots import RestoredModel, read_header
from svmstream.app.models.view import ModelView, estimator_stats
from svmstream.solvers.persistence import CorruptStateError

log = logging.getLogger("svmstream.versions")


class VersionNotFound(ModelNotFound):
    """A version that is not in the model's history (HTTP 404)."""


class NoHistory(AskTheLearner):
    """The server keeps no history (a prediction replica, or snapshots off): HTTP 409."""

    default_status = 409


class Versions:
    """The history of a registry's models (its :class:`~.snapshots.SnapshotStore`).

    Parameters
    ----------
    registry : Registry
        The learner's registry (a replica's has no store: every call raises NoHistory).
    max_pinned : int
        Versions other than the live ones held decoded at once.
    max_bytes : int, optional
        Bytes they may hold, all models together (default: the registry's
        ``max_pinned_bytes`` setting).
    """

    def __init__(self, registry, max_pinned: int = 4, max_bytes: int | None = None):
        self.registry = registry
        self.max_pinned = int(max_pinned)
        self._headers: dict[tuple[Path, int, int, int], RestoredModel | None] = {}
        if max_bytes is None:
            max_bytes = getattr(registry.settings, "max_pinned_bytes", 64 << 20)
        #: the decoded pinned versions (server-wide bound ``max_pinned_bytes``)
        self.pinned = PinnedCache(max_bytes, self.max_pinned)

    @property
    def store(self):
        store = self.registry.store
        if store is None:
            raise NoHistory(
                "this server keeps no model history (a prediction replica, or snapshots are off): "
                "ask the learner"
            )
        return store

    # ------------------------------------------------------------------ listing
    def _header(self, path: Path) -> RestoredModel | None:
        """The header of one snapshot file, or None (logged) when it does not read.  Cached by
        the file's identity (path, inode, modification time): a model replaced, or deleted and
        created again, writes new files under the same paths."""
        try:
            st = path.stat()
        except OSError:
            return None
        key = (path, st.st_ino, st.st_mtime_ns, st.st_size)
        if key in self._headers:
            return self._headers[key]
        try:
            found = read_header(path.read_bytes(), path)
        except (OSError, CorruptStateError) as exc:
            log.warning("history: skipping %s: %s", path, exc)
            found = None
        self._headers[key] = found
        return found

    def entries(self, name: str) -> list[tuple[Any, RestoredModel]]:
        """``(KeptFile, header)`` of ``name``'s readable snapshot files of the model's own
        generation (``ModelHandle.generation``: a replaced model's files are never its
        history), newest first (the model must exist: ModelNotFound)."""
        handle = self.registry.get(name)
        files = self.store.kept_files(name)
        on_disk = {f.path for f in files}
        directory = self.store.model_dir(name)
        for key in [k for k in self._headers if k[0].parent == directory and k[0] not in on_disk]:
            self._headers.pop(key, None)  # pruned since
        out = []
        for f in files:
            header = self._header(f.path)
            if header is not None and header.name == name and header.generation == handle.generation:
                out.append((f, header))
        return out

    def listing(self, name: str) -> list[dict[str, Any]]:
        """``GET /models/{name}/versions``: one dict per kept version, newest first."""
        entries = self.entries(name)
        files = [f for f, _ in entries]
        generation = self.registry.get(name).generation
        why = reasons(files, read_marks(self.store.model_dir(name), generation), self.store.keep)
        out, seen = [], set()
        for f, header in entries:
            if header.version in seen:  # the same version saved twice: the newest file serves it
                continue
            seen.add(header.version)
            stats = header.stats or {}
            figures = header.figures or {}
            out.append(
                {
                    "version": header.version,
                    "saved_at": header.saved_at,
                    "n_seen": stats.get("n_seen"),
                    "examples": stats.get("examples"),
                    "prequential_accuracy": figures.get("prequential_accuracy"),
                    "size_bytes": f.size,
                    "kept_because": why[f.seq],
                    "fitted": header.fitted,
                }
            )
        return out

    def path_of(self, name: str, version: int) -> tuple[Path, int]:
        """``(path, seq)`` of the newest file of ``name`` at ``version``.  Raises
        VersionNotFound naming the versions kept."""
        entries = self.entries(name)
        for f, header in entries:
            if header.version == version:
                return f.path, f.seq
        kept = sorted({h.version for _, h in entries})
        raise VersionNotFound(
            f"version: model {name!r} has no version {version} in its history (kept: {kept})", field="version"
        )

    # ------------------------------------------------------------------ pinned views
    def view(self, name: str, version: int | None) -> ModelView:
        """The view that answers for ``version`` of ``name`` (None or the live version: the
        live view), else that version's serving state held in :attr:`pinned`
        (:class:`~.pinned.PinnedCache`: bounded in bytes, decoded once).  Raises
        ModelNotFound / VersionNotFound / NoHistory / PinnedBusy (503)."""
        handle = self.registry.get(name)
        live = handle.view
        if version is None or version == live.version:
            return live
        identity = handle.generation or id(handle)  # a replaced model's versions are another model's
        self.pinned.drop(lambda k: k[0] != name or k[1] == identity)

        def decode() -> tuple[ModelView, int]:
            path, _ = self.path_of(name, int(version))
            found, size = read_serving(path, self.pinned.reserve)
            return pinned_view(found, live), size

        return self.pinned.get((name, identity, int(version)), decode)

    # ------------------------------------------------------------------ rollback
    def rollback(self, name: str, version: int) -> dict[str, Any]:
        """Make ``version`` of ``name`` the live model, as a new version, and snapshot it at
        once (the rollback is durable when this returns; it is itself a version, so it can be
        undone).  The stream's position does not move back: what was learned after
        ``version`` is not replayed.  Raises ModelNotFound, VersionNotFound, NoHistory,
        ServiceError 409 (a replica's or a batch-trained model), LearnerBusy, ModelClosed."""
        handle = self.registry.get(name)
        handle._refuse_if_batch_trained()
        path, seq = self.path_of(name, int(version))
        found = self.store.read(path)
        if found.estimator is None:
            raise ServiceError(
                f"version: version {version} of model {name!r} has not learned anything",
                field="version",
                status=409,
            )
        before = handle.view.version
        note = {"to_version": int(version), "from_version": before}
        feedback = getattr(self.registry, "feedback", None)
        ledger = feedback.ledger(handle) if feedback is not None else None
        with ledger.lock if ledger is not None else contextlib.nullcontext():
            with handle._lock:
                handle._check_can_queue()
                future = handle._queue(revert, handle, found, note)
            queued_seq = ledger.seq if ledger is not None else 0  # feedback batches before it
        view = future.result()
        written = self.registry.snapshot(handle, force=True)
        # after the snapshot: a kill before it leaves those ids "duplicate", never learned twice
        if ledger is not None:
            ledger.rolled_back(int(found.extra.get("feedback_seq", 0) or 0), queued_seq)
        marks = {seq: f"rolled back to (from version {before})"}
        if written:
            marks[_seq_of(Path(written))] = f"rollback from version {before} to version {version}"
        add_marks(self.store.model_dir(name), marks, handle.generation)
        log.warning(
            "model %r: rolled back from version %d to version %d (now version %d)",
            name,
            before,
            version,
            view.version,
        )
        return {
            "model": name,
            "version": view.version,
            "rolled_back_to": int(version),
            "from_version": before,
        }

    def predict(self, name: str, version: int, X, declared: int | None = None):
        """``(view, X, decision)`` of ``version`` of ``name`` (:meth:`view`) for the rows ``X``
        (conformed to its dimension).  Raises what :meth:`view` raises, ModelNotFitted,
        InvalidInput."""
        view = self.view(name, version)
        if view.estimator is None:
            raise ModelNotFitted(f"version {version} of model {name!r} has not learned from any example")
        X = conform(rows_for_view(view, X), view.n_features, declared, name)
        return view, X, view.decision_function(X)

    def forget(self, name: str) -> None:
        """Drop the pinned versions of ``name`` (deleted or replaced)."""
        self.pinned.drop(lambda k: k[0] != name)


def _seq_of(path: Path) -> int:
    return int(path.name.rsplit("-", 1)[1].split(".", 1)[0])


def revert(handle, found: RestoredModel, note: dict[str, int]) -> ModelView:
    """Learner task of :meth:`Versions.rollback`: the decoded version ``found`` becomes
    ``handle``'s estimator (its configuration, challengers, labels, dimension and rollback
    checkpoint with it) and is published as the next version; the view's ``extra`` (the stream
    position) is kept and records the rollback."""
    handle._load_for_task()  # on failure it releases the pending slot and raises
    try:
        with handle._est_lock:
            est = found.estimator
            config = handle.config = found.config  # a promotion since may have changed it
            # the challengers as they were at that version (they restart from it, scores and all)
            handle.challengers = challenger_set(
                (found.challengers, found.challenger_arrays), config, handle.settings, False
            )
            codec = (
                shared_codec(found.classes or [], learn=True)
                if config.learns_classes
                else shared_codec(config.classes)
            )
            with handle._lock:
                if found.n_features is not None:
                    handle._n_features = found.n_features
                handle._fixed = bool(found.n_features_fixed)
            handle._est = est
            view = handle._publish(est, codec, {"rollback": note})
            handle._checkpoint, handle._journal, handle._journal_bytes = detached_state(est), [], 0
            return view
    finally:
        with handle._lock:
            handle._pending -= 1


def pinned_view(found: RestoredModel, live: ModelView) -> ModelView:
    """A read-only view of a decoded snapshot (``found``) of the model whose live view is
    ``live``: its own labels, dimension and figures."""
    config = found.config
    codec = (
        shared_codec(found.classes or [], learn=True)
        if config.learns_classes
        else shared_codec(config.classes)
    )
    return ModelView(
        name=live.name,
        config=config,
        codec=codec,
        estimator=published(found.estimator) if found.estimator is not None else None,
        version=found.version,
        n_features=found.n_features,
        stats=estimator_stats(found.estimator),
        extra=dict(found.extra),
        published_at=found.saved_at,
        n_features_fixed=found.n_features_fixed,
        fields=named_schema(config, found.fields),
    )


class PinnedRegistry:
    """One pinned version shaped like the registry (``get(name).view``, ``predict``) for the
    protocol routes written against it (:func:`for_version`)."""

    def __init__(self, view: ModelView):
        self.view = view

    def get(self, name: str) -> PinnedRegistry:
        return self

    def predict(self, name: str, X, declared: int | None = None, with_rows: bool = False):
        view = self.view
        if view.estimator is None:
            raise ModelNotFitted(f"version {view.version} of model {name!r} has not learned from any example")
        X = conform(rows_for_view(view, X), view.n_features, declared, name)
        decision = view.decision_function(X)
        return (view, X, decision) if with_rows else (view, decision)


def for_version(registry, versions: Versions | None, name: str, version: str | None):
    """What answers for ``version`` (a path segment) of ``name``: the registry itself for no
    version, the live one or a non-number (which the caller refuses), else a
    :class:`PinnedRegistry` of that version.  Raises VersionNotFound, NoHistory."""
    if version is None or versions is None or not (version.isascii() and version.isdigit()):
        return registry  # "²" is a digit to str.isdigit but not to int()
    if int(version) == registry.get(name).view.version:
        return registry
    return PinnedRegistry(versions.view(name, int(version)))
