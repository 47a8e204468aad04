"""Snapshot files of named models: atomic writes, retention, checksums, restore.

Layout: ``<snapshot_dir>/<model>/<model>-<seq:012d>.svmstate``, one file per snapshot,
``seq`` increasing per model across restarts.  A file is the solver's pickle-free state
format (:func:`svmstream.solvers.persistence.encode_state`: magic, format version, JSON
header with the payload length and SHA-256, ``.npz`` payload) written with
:func:`svmstream.solvers.persistence.write_atomic` (temp file, fsync, rename, fsync of the
directory).  The service adds ``meta["service"]``::

    {"format": 1, "model": name, "seq": seq, "config": {...}, "version": batches applied,
     "n_features": d or null, "n_features_fixed": bool, "extra": {...}, "saved_at": unix time,
     "classes": [...], "stats": {...}, "generation": "..."}

``generation`` is the model's identity, made when ``PUT`` (or a batch job) created it: a model
replaced, or deleted and created again, under the same name is another generation, and its
history (:mod:`.versions`) and remembered predictions (:mod:`.feedback`) are its own.

``stats`` are the published view's figures at that version
(:func:`svmstream.app.models.view.estimator_stats`): with them a restart registers a model
from the file's header alone (:meth:`SnapshotStore.load_newest_header`, :func:`read_header`)
and decodes its arrays on first use (lazy restore, ``docs/deployment.md``).  Files written
before ``stats`` existed are decoded at start-up, as before.

``n_features_fixed`` is false while sparse input may still widen the model (files without it:
true).  A configuration saved before the streaming preprocessing existed (no ``scaling``)
restores with it off (``scaling="none"``, ``warmup=0``, ``shuffle_buffer=0``,
``run_guard=false``), which is what such a model ran.

``extra`` carries caller metadata such as the last applied stream entry ID.  A model
that has not learned yet is saved with ``meta["estimator"] = None`` and no arrays, so
that its configuration survives a restart.

Restore takes the newest file that decodes and rebuilds; each file that does not is
logged (path and reason) and skipped.  Retention (:mod:`.history`): the newest ``keep`` files,
every marked one (promoted, rolled back to), within ``max_bytes`` per model.

The store deals in plain values (name, :class:`ModelConfig`, the estimator's state,
version, ``extra``...), not in the registry's objects: the registry decides what to save
(:meth:`svmstream.app.models.registry.Registry.snapshot`) and what to rebuild from a
:class:`RestoredModel`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from svmstream.app.models.challengers import PREFIX, split_state
from svmstream.app.models.config import ModelConfig
from svmstream.app.models.history import KeptFile, files_to_prune, read_marks
from svmstream.app.models.json_values import interned, jsonable
from svmstream.solvers.persistence import (
    CorruptStateError,
    decode_meta,
    decode_state,
    encode_state,
    estimator_from_state,
    write_atomic,
)

log = logging.getLogger("svmstream.snapshots")

SUFFIX = ".svmstate"
SERVICE_FORMAT = 1


@dataclass
class RestoredModel:
    """A model rebuilt from a snapshot (``path``: its file; None for bytes from Redis)."""

    name: str
    config: ModelConfig
    estimator: Any | None
    version: int
    n_features: int | None
    extra: dict[str, Any]
    path: Path | None
    saved_at: float
    seq: int
    n_features_fixed: bool = True
    classes: list[Any] | None = None
    #: the view's figures saved with the file (None: a file written before they were saved)
    stats: dict[str, Any] | None = None
    #: read from the header only (:func:`read_header`): ``estimator`` is not decoded yet and
    #: ``fitted`` says whether the file holds one
    header_only: bool = False
    fitted: bool = False
    #: the service's meters when it was saved (``prequential_accuracy``...; None: not saved)
    figures: dict[str, Any] | None = None
    #: the model's challengers as saved (``meta["challengers"]``, :mod:`.challengers`) and their
    #: arrays (None: read from the header only, not decoded)
    challengers: dict[str, Any] | None = None
    challenger_arrays: dict[str, np.ndarray] | None = None
    #: the named-field schema's state (``meta["service"]["fields"]``; None: positional rows)
    fields: dict[str, Any] | None = None
    #: the model's identity (``ModelHandle.generation``; None: a file written before it existed)
    generation: str | None = None


class Written(NamedTuple):
    """A snapshot just written (:meth:`SnapshotStore.write`): its file, time, and the arrays and
    meta (``meta["service"]`` set) it holds."""

    path: Path
    saved_at: float
    arrays: dict[str, np.ndarray]
    meta: dict[str, Any]


@dataclass
class SnapshotStore:
    """Snapshot files under ``root`` (one sub-directory per model).

    Parameters
    ----------
    root : Path
        Snapshot directory (created if missing).
    keep : int
        Number of newest files kept per model (``keep_versions``).
    max_bytes : int or None
        Disk budget of one model's files (``max_history_bytes``); None: no budget.
    temp_grace_s : float
        Temp files of interrupted writes are removed (:meth:`clean_temp_files`) only once this
        old (s); 0: at once, for a store one process owns.
    """

    root: Path
    keep: int = 20
    max_bytes: int | None = None
    temp_grace_s: float = 0.0
    _last_seq: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    # ------------------------------------------------------------------ listing
    def model_dir(self, name: str) -> Path:
        return self.root / name

    def files(self, name: str) -> list[tuple[int, Path]]:
        """Snapshot files of ``name`` as ``(seq, path)``, newest first."""
        return _files_in(self.model_dir(name), name)

    def listing(self, clean: bool = False) -> dict[str, list[tuple[int, Path]]]:
        """Every model that has a snapshot directory with at least one file: name ->
        :meth:`files` (one pass over the directories; what a restart reads).  With ``clean``
        the temp files of writes interrupted by a crash are removed on the way
        (:meth:`clean_temp_files`)."""
        if not self.root.is_dir():
            return {}
        out = {}
        with os.scandir(self.root) as entries:
            for entry in entries:
                if entry.is_dir():
                    found = _files_in(Path(entry.path), entry.name, clean, self.temp_grace_s)
                    if found:
                        out[entry.name] = found
        return dict(sorted(out.items()))

    def model_names(self) -> list[str]:
        """Names of the models that have a snapshot directory with at least one file."""
        return list(self.listing())

    def next_seq(self, name: str) -> int:
        files = self.files(name)
        on_disk = files[0][0] if files else 0
        seq = max(on_disk, self._last_seq.get(name, 0)) + 1
        self._last_seq[name] = seq
        return seq

    # ------------------------------------------------------------------ writing
    def write(
        self,
        name: str,
        config: ModelConfig,
        state: tuple[dict[str, np.ndarray], dict[str, Any]] | None,
        *,
        version: int,
        n_features: int | None,
        extra: dict[str, Any],
        n_features_fixed: bool = True,
        classes: list[Any] | None = None,
        stats: dict[str, Any] | None = None,
        figures: dict[str, Any] | None = None,
        fields: dict[str, Any] | None = None,
        generation: str | None = None,
    ) -> Written:
        """Write a snapshot of model ``name`` and prune old files.

        Parameters
        ----------
        name, config
            The model's name and configuration.
        state : (arrays, meta) or None
            The estimator's ``get_state()``; None for a model that has not learned yet.
        version, n_features, extra
            Batches applied, input dimension, caller metadata (saved in ``meta["service"]``).
        classes
            The model's labels (learned ones for a model without declared ``classes``).
        stats
            The published view's figures at ``version`` (saved so that a restart can list the
            model without decoding it).
        figures
            The service's meters at ``version`` (prequential accuracy: the history lists it).
        fields
            The model's named-field schema (``FieldSchema.get_state()[1]``), if it has one.
        generation
            The model's identity (made at ``PUT``): the history lists only its own files.

        Returns
        -------
        :class:`Written`: ``(path, saved_at, arrays, meta)``, the arrays and meta as saved
        """
        directory = self.model_dir(name)
        directory.mkdir(parents=True, exist_ok=True)
        if state is None:
            arrays: dict[str, np.ndarray] = {}
            meta: dict[str, Any] = {"estimator": None}
        else:
            arrays, meta = state
            meta = dict(meta)
        seq = self.next_seq(name)
        saved_at = time.time()
        meta["service"] = {
            "format": SERVICE_FORMAT,
            "model": name,
            "seq": seq,
            "config": config.to_json(),
            "version": version,
            "n_features": n_features,
            "n_features_fixed": bool(n_features_fixed),
            "extra": extra,
            "classes": classes,
            "saved_at": saved_at,
        }
        if stats is not None:
            meta["service"]["stats"] = jsonable(stats)
        if figures is not None:
            meta["service"]["figures"] = jsonable(figures)
        if fields is not None:
            meta["service"]["fields"] = fields
        if generation is not None:
            meta["service"]["generation"] = str(generation)
        path = directory / f"{name}-{seq:012d}{SUFFIX}"
        write_atomic(path, encode_state(arrays, meta), before_replace=self.before_replace(name))
        self.prune(name)
        return Written(path, saved_at, arrays, meta)

    def before_replace(self, name: str) -> Callable[[], None] | None:
        """A check run right before a snapshot file of ``name`` is renamed into place (it raises
        to refuse the file); None here, a fencing check in a clustered learner's store."""
        return None

    def kept_files(self, name: str) -> list[KeptFile]:
        """:meth:`files` of ``name`` with their sizes (newest first; a file gone meanwhile is
        left out)."""
        out = []
        for seq, path in self.files(name):
            try:
                out.append(KeptFile(seq, path, path.stat().st_size))
            except FileNotFoundError:
                continue
        return out

    def prune(self, name: str) -> None:
        """Apply the retention policy to ``name``'s files (:func:`.history.files_to_prune`)."""
        files = self.kept_files(name)
        if len(files) <= 1:
            return
        marks = read_marks(self.model_dir(name)) if len(files) > self.keep or self.max_bytes else {}
        for doomed in files_to_prune(files, marks, self.keep, self.max_bytes):
            try:
                doomed.path.unlink()
            except FileNotFoundError:
                pass

    def delete(self, name: str) -> None:
        """Remove every snapshot of ``name`` (its directory)."""
        shutil.rmtree(self.model_dir(name), ignore_errors=True)
        self._last_seq.pop(name, None)

    def clean_temp_files(self) -> None:
        """Remove temp files left by a write interrupted by a crash."""
        self.listing(clean=True)

    # ------------------------------------------------------------------ reading
    def read(self, path: Path) -> RestoredModel:
        """Decode and rebuild one snapshot file.

        Raises
        ------
        CorruptStateError
            If the file is truncated, fails its checksum, or its metadata or arrays do
            not rebuild a model.
        """
        try:
            blob = path.read_bytes()
        except OSError as exc:
            raise CorruptStateError(f"unreadable: {exc}") from exc
        return decode_snapshot(blob, path)

    def load_newest_header(
        self, name: str, files: list[tuple[int, Path]] | None = None
    ) -> RestoredModel | None:
        """The newest snapshot of ``name`` whose header and checksum are sound, read without
        decoding its arrays (:func:`read_header`; ``header_only``), or None.  A file without
        saved ``stats`` (written before they existed) is decoded whole instead.

        ``files``: :meth:`files` of ``name`` if the caller has listed them already.
        Every file skipped on the way is logged at WARNING level with its path and reason."""

        def header(path: Path) -> RestoredModel:
            try:
                blob = path.read_bytes()
            except OSError as exc:
                raise CorruptStateError(f"unreadable: {exc}") from exc
            restored = read_header(blob, path)
            # a model whose challengers hold rows before the champion learned: decoded now
            whole = restored.stats is None or (restored.challengers is not None and not restored.fitted)
            return decode_snapshot(blob, path) if whole else restored

        return self._newest(name, header, self.files(name) if files is None else files)

    def load_newest(self, name: str) -> RestoredModel | None:
        """The newest snapshot of ``name`` that decodes and rebuilds, or None.

        Every file skipped on the way is logged at WARNING level with its path and reason.
        """
        return self._newest(name, self.read, self.files(name))

    @staticmethod
    def _newest(name: str, read, files: list[tuple[int, Path]]) -> RestoredModel | None:
        """The first of ``files`` (newest first) that ``read`` returns for model ``name``
        without raising :class:`CorruptStateError`; each file passed over is logged."""
        for _, path in files:
            try:
                restored = read(path)
            except CorruptStateError as exc:
                log.warning("skipping snapshot %s: %s", path, exc)
                continue
            if restored.name != name:
                log.warning("skipping snapshot %s: it belongs to model %r", path, restored.name)
                continue
            return restored
        return None


_FILE_RE = re.compile(rf"(.+)-(\d{{12}}){re.escape(SUFFIX)}\Z")  # matched whole (fullmatch)
_TEMP_RE = re.compile(rf"^\..*{re.escape(SUFFIX)}\.tmp-")


def _files_in(
    directory: Path, name: str, clean: bool = False, grace_s: float = 0.0
) -> list[tuple[int, Path]]:
    """``(seq, path)`` of the snapshot files of ``name`` in ``directory``, newest first; with
    ``clean``, temp files of interrupted writes (``.<file>.svmstate.tmp-<pid>``) last modified
    more than ``grace_s`` seconds ago are removed."""
    found = []
    now = time.time()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if clean and entry.name.startswith(".") and _TEMP_RE.match(entry.name):
                    if grace_s > 0 and now - entry.stat().st_mtime < grace_s:
                        continue  # another process's write may be under way (a shared store)
                    log.info("removing unfinished snapshot temp file %s", entry.path)
                    Path(entry.path).unlink(missing_ok=True)
                    continue
                m = _FILE_RE.fullmatch(entry.name)
                if m and m.group(1) == name and entry.is_file():
                    found.append((int(m.group(2)), Path(entry.path)))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found.sort(reverse=True)
    return found


def _service_fields(meta: dict[str, Any], path: Path | None) -> dict[str, Any]:
    """The :class:`RestoredModel` fields of a state's ``meta["service"]`` (older configurations
    brought up to date).  Raises KeyError, TypeError or pydantic's ValidationError."""
    service = meta["service"]
    saved = dict(service["config"])
    if "scaling" not in saved:  # saved before the streaming preprocessing existed
        saved.update(scaling="none", warmup=0, shuffle_buffer=0, run_guard=False)
    if "on_drift" not in saved:  # saved before drift handling existed: it stays off
        saved["on_drift"] = "none"
    saved.setdefault("rehearsal", 0)  # saved before rehearsal existed: it stays off
    stats = service.get("stats")
    return dict(
        name=str(service["model"]),
        config=ModelConfig.model_validate(saved),
        version=int(service["version"]),
        n_features=service.get("n_features"),
        extra=dict(service.get("extra") or {}),
        path=path,
        saved_at=float(service.get("saved_at") or (path.stat().st_mtime if path is not None else 0.0)),
        seq=int(service.get("seq", 0)),
        n_features_fixed=bool(service.get("n_features_fixed", True)),
        classes=service.get("classes"),
        stats=interned(stats) if isinstance(stats, dict) else None,
        fitted=meta.get("estimator") is not None,
        figures=service.get("figures") if isinstance(service.get("figures"), dict) else None,
        challengers=meta.get("challengers"),
        fields=service.get("fields") if isinstance(service.get("fields"), dict) else None,
        generation=service.get("generation") if isinstance(service.get("generation"), str) else None,
    )


def read_header(blob: bytes, path: Path | None = None) -> RestoredModel:
    """A snapshot's model as its header describes it, arrays not decoded
    (:func:`svmstream.solvers.persistence.decode_meta`: magic, lengths and checksum are
    verified): ``estimator`` None, ``header_only`` True, ``fitted`` whether it holds one.

    Raises
    ------
    CorruptStateError
        If the bytes are truncated, fail their checksum, or the service metadata is unusable.
    """
    meta = decode_meta(blob)
    try:
        return RestoredModel(estimator=None, header_only=True, **_service_fields(meta, path))
    except Exception as exc:  # missing keys, bad config
        raise CorruptStateError(f"cannot rebuild model: {type(exc).__name__}: {exc}") from exc


def decode_snapshot(blob: bytes, path: Path | None = None) -> RestoredModel:
    """Decode and rebuild the bytes of one snapshot (a file's, or a replica's copy from Redis;
    ``path``: where they came from, None for Redis).

    Raises
    ------
    CorruptStateError
        If the bytes are truncated, fail their checksum, or their metadata or arrays do not
        rebuild a model.
    """
    arrays, meta = decode_state(blob)
    return restored_from_state(arrays, meta, path)


def restored_from_state(
    arrays: dict[str, np.ndarray], meta: dict[str, Any], path: Path | None
) -> RestoredModel:
    """The model of a decoded snapshot ``(arrays, meta)`` (:func:`decode_snapshot`; the serving
    encoding's, :func:`svmstream.app.models.serving.decode_serving`).  Raises CorruptStateError."""
    try:
        fields = _service_fields(meta, path)
        estimator = None
        own_arrays, own_meta = split_state(arrays, meta)
        if meta.get("estimator") is not None:
            estimator = estimator_from_state(own_arrays, own_meta)
        if fields["challengers"] is not None:
            fields["challenger_arrays"] = {k: v for k, v in arrays.items() if k.startswith(PREFIX)}
        return RestoredModel(estimator=estimator, **fields)
    except CorruptStateError:
        raise
    except Exception as exc:  # missing keys, bad config, arrays that do not rebuild
        raise CorruptStateError(f"cannot rebuild model: {type(exc).__name__}: {exc}") from exc


async def run_snapshotter(
    snapshot_changed: Callable[[], Any], interval_s: float, what: str = "periodic snapshot"
) -> None:
    """Every ``interval_s`` seconds, call ``snapshot_changed`` in a worker thread
    (:meth:`svmstream.app.models.registry.Registry.snapshot_changed`: snapshot each model
    whose published view changed; also :meth:`~svmstream.app.models.registry.Registry.park_idle`).

    Runs until cancelled; a failing write is logged (``what`` failed) and retried at the next tick.
    """
    while True:
        await asyncio.sleep(interval_s)
        try:
            await asyncio.to_thread(snapshot_changed)
        except Exception:  # keep the loop alive; the error is logged with its traceback
            log.exception("%s failed", what)
