"""Batch training jobs (DC-SVM, AVSF, LIBLINEAR dual CD) in worker processes.

A job trains one of the batch solvers on a data file and registers the fitted estimator as
a servable model of the :class:`app.registry.Registry`, where ``/predict``, snapshots and
restore treat it like any other model (``/learn`` refuses it: it does not learn online).

Process model
-------------
* One worker **process** per job (multiprocessing ``forkserver`` context by default, or
  ``spawn``; never ``fork``: the server process has threads).  The worker is started
  with ``daemon=False`` so that DC-SVM can run its own process pool for the level
  sub-problems (``n_jobs``; default :attr:`Settings.job_dcsvm_n_jobs`, None = all cores).
  The worker makes itself a process-group leader, so a cancelled job is killed together
  with its pool workers (``killpg``).
* The worker receives the job as a plain dict (the **path** of the data, never arrays),
  loads the file itself (:func:`load_dataset`: LIBSVM through
  :func:`sklearn.datasets.load_svmlight_file`, ``.bz2``/``.gz`` too, or CSV), fits, scores
  the optional test file, and writes the model with :func:`solvers.persistence.encode_state`
  to ``<jobs_dir>/results/<job id>.svmstate`` (pickle-free).  Progress and the final
  outcome travel as small dicts over a one-way :func:`multiprocessing.Pipe` (no feeder
  thread in the worker, so DC-SVM's fork pool forks a single-threaded process).
* A supervisor thread per running job reads that pipe, keeps the job's latest progress
  and a per-stage timeline, and on the result decodes the file and registers the model.
  A worker that dies without an outcome (signal, ``os._exit``, out of memory) marks the job
  failed with its exit status; an exception in the worker marks it failed with the
  exception's message.
* Cancel: a :class:`multiprocessing.Event` read by the solver's ``should_stop`` callback
  (DC-SVM polls it about every 0.1 s, the linear solvers before every kernel call); if the
  worker has not exited :attr:`Settings.job_cancel_grace_s` (0.5 s) after the request, its
  process group is killed (SIGKILL).
* At most :attr:`Settings.max_concurrent_jobs` (default 1) workers run at once; further
  jobs wait in a FIFO queue.

Job records live in this process's memory (the newest :attr:`Settings.job_history`
finished ones are kept); the models they produced persist through snapshots.

See ``docs/jobs.md``.
"""

from __future__ import annotations

import bz2
import collections
import gzip
import logging
import math
import multiprocessing as mp
import os
import re
import secrets
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import scipy.sparse as sp

# Importing the estimator modules registers them with solvers.persistence, so that the
# snapshots of batch-trained models restore (estimator_from_state) in the server.
import svmstream.solvers.dcsvm_estimator  # noqa: F401
import svmstream.solvers.linear_estimator  # noqa: F401
from svmstream.app.ingest.batches import BatchError
from svmstream.app.models.factory import make_job_estimator  # noqa: F401
from svmstream.solvers.persistence import decode_state, encode_state, estimator_from_state, write_atomic

if TYPE_CHECKING:  # pragma: no cover
    from svmstream.app.models.registry import Registry
    from svmstream.app.settings import Settings

log = logging.getLogger("svmstream.jobs")

ALGORITHMS = ("dcsvm", "avsf", "liblinear-cd")
"""``dcsvm``: :class:`solvers.dcsvm_estimator.DCSVMClassifier`; ``avsf`` and
``liblinear-cd``: :class:`solvers.linear_estimator.LinearDualCDClassifier` with
``selection="avsf"`` / ``"uniform"``."""

STATES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED = frozenset({"succeeded", "failed", "cancelled"})

UPLOAD_ID_RE = re.compile(r"^up-[0-9a-f]{20}$")
JOB_ID_RE = re.compile(r"^[0-9a-f]{16}$")
FORMATS = ("libsvm", "csv")
COMPRESSIONS = {"bz2": ".bz2", "gzip": ".gz", None: ""}

DENSE_MIN_DENSITY = 0.25
"""Sparse training data at least this dense (and small enough, :data:`DENSE_MAX_BYTES`) is
densified before the solver: the dense kernel paths are faster there (ijcnn1: 59% dense)."""
DENSE_MAX_BYTES = 2 * 1024**3

PROGRESS_INTERVAL_S = 0.2
"""The worker forwards at most one progress report per this interval (plus every change
of problem, stage or level)."""
MAX_TIMELINE = 400


class JobError(BatchError):
    """A refused job or upload request; ``status`` is the HTTP status (rendered by the
    service's :class:`app.batches.BatchError` handler)."""


# =============================================================================== data files


def _open_binary(path: str | os.PathLike):
    """Open a possibly compressed file (bzip2 / gzip detected by magic bytes)."""
    with open(path, "rb") as fh:
        magic = fh.read(3)
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def sniff(head: bytes) -> tuple[str | None, str | None]:
    """Guess ``(compression, format)`` of a data file from its first bytes.

    Parameters
    ----------
    head : bytes
        The first bytes of the file (a few KB; compressed files need enough to decompress
        their first line).

    Returns
    -------
    compression : {"bz2", "gzip", None}
    format : {"libsvm", "csv", None}
        ``libsvm`` when the first data line has ``index:value`` tokens (or is a lone
        label), ``csv`` when it has commas; None when it is neither (or not text).
    """
    compression = "bz2" if head[:3] == b"BZh" else "gzip" if head[:2] == b"\x1f\x8b" else None
    text = head
    if compression == "bz2":
        try:
            text = bz2.BZ2Decompressor().decompress(head)
        except (OSError, EOFError, ValueError):
            return compression, None
    elif compression == "gzip":
        try:
            import zlib

            text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head)
        except Exception:  # noqa: BLE001 - any zlib error: not readable
            return compression, None
    try:
        decoded = text[:65536].decode("utf-8")
    except UnicodeDecodeError as exc:  # a multi-byte character cut at the end is fine
        if exc.start < len(text[:65536]) - 4:
            return compression, None
        decoded = text[:exc.start].decode("utf-8")
    for line in decoded.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "," in line:
            return compression, "csv"
        tokens = line.split()
        if all(":" in t for t in tokens[1:]) and _is_number(tokens[0]):
            return compression, "libsvm"
        return compression, None
    return compression, None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def detect_format(path: str | os.PathLike) -> str:
    """``"csv"`` or ``"libsvm"`` for a data file: by name (``.csv``, ``.csv.gz``,
    ``.csv.bz2``; ``.libsvm``, ``.svm``), else by its first line (:func:`sniff`), else
    ``"libsvm"``."""
    name = Path(path).name.lower()
    for suffix in (".bz2", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    if name.endswith(".csv"):
        return "csv"
    if name.endswith((".libsvm", ".svm", ".svmlight")):
        return "libsvm"
    try:
        with open(path, "rb") as fh:
            head = fh.read(256 * 1024)
    except OSError:
        return "libsvm"
    return sniff(head)[1] or "libsvm"


def load_csv(path: str | os.PathLike, n_features: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read a CSV data file: label in the first column, then the features.

    A first line whose first field is not a number is a header and skipped; lines
    starting with ``#`` are comments.  ``.bz2``/``.gz`` files are decompressed.

    Parameters
    ----------
    path : path-like
    n_features : int, optional
        Expected number of feature columns (a test file must match its training file).

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    ValueError
        On a ragged or non-numeric line, non-finite values, no rows, or a width that
        differs from ``n_features``.
    """
    with _open_binary(path) as raw:
        import io

        text = io.TextIOWrapper(raw, encoding="utf-8")
        first = text.readline()
        while first and (not first.strip() or first.lstrip().startswith("#")):
            first = text.readline()
        if not first:
            raise ValueError(f"{Path(path).name}: no data rows")
        skip_first = not _is_number(first.split(",")[0].strip())
        lines = ([] if skip_first else [first])
        try:
            data = np.loadtxt(_chain(lines, text), delimiter=",", comments="#", dtype=np.float64, ndmin=2)
        except ValueError as exc:
            raise ValueError(f"{Path(path).name}: not a numeric CSV file: {exc}") from None
    if data.shape[0] == 0:
        raise ValueError(f"{Path(path).name}: no data rows")
    if data.shape[1] < 2:
        raise ValueError(f"{Path(path).name}: a CSV row needs a label and at least one feature")
    if not np.isfinite(data).all():
        row = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
        raise ValueError(f"{Path(path).name}: row {row}: non-finite value")
    X, y = np.ascontiguousarray(data[:, 1:]), np.ascontiguousarray(data[:, 0])
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{Path(path).name}: {X.shape[1]} feature columns, expected {n_features}")
    return X, y


def _chain(first: list[str], rest):
    yield from first
    yield from rest


def load_dataset(path: str | os.PathLike, n_features: int | None = None,
                 fmt: str | None = None) -> tuple[Any, np.ndarray]:
    """Load a LIBSVM/svmlight or CSV data file (``.bz2``/``.gz`` read directly).

    Parameters
    ----------
    path : path-like
    n_features : int, optional
        Width of the training data (pass it for a test file: LIBSVM test files may have a
        smaller largest index).
    fmt : {"libsvm", "csv"}, optional
        Default: :func:`detect_format`.

    Returns
    -------
    X : CSR matrix (LIBSVM) or ndarray (CSV) of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    ValueError
        The file does not parse (the loader's message, prefixed with the file name).
    OSError
        The file cannot be read.
    """
    fmt = fmt or detect_format(path)
    if fmt == "csv":
        return load_csv(path, n_features)
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"{Path(path).name}: not a valid LIBSVM file: {exc}") from None
    if X.shape[0] == 0:
        raise ValueError(f"{Path(path).name}: no data rows")
    return X.tocsr(), y


def prepare_X(X):
    """The training/test matrix in the form the solvers run fastest on: dense float64 for
    dense enough data (:data:`DENSE_MIN_DENSITY`), else CSR float64 with int32 indices."""
    if not sp.issparse(X):
        return np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    if n * d and X.nnz >= DENSE_MIN_DENSITY * n * d and n * d * 8 <= DENSE_MAX_BYTES:
        return np.ascontiguousarray(X.toarray(), dtype=np.float64)
    X = sp.csr_matrix(X, dtype=np.float64)
    if X.indices.dtype != np.int32 and X.nnz < 2**31:
        X.indices = X.indices.astype(np.int32)
    return X


# =============================================================================== estimators


def _json_label(value: float) -> int | float:
    value = float(value)
    return int(value) if value.is_integer() else value


def _n_support_vectors(est) -> int | None:
    early = getattr(est, "early_models_", None)
    if early is not None:
        return int(sum(m.sv.n_samples for m in early))
    support = getattr(est, "support_", None)
    return None if support is None else int(len(support))


def _finite(value: Any) -> Any:
    """JSON-safe scalars: numpy -> Python, non-finite floats -> None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    return value


def normalise_progress(report: dict[str, Any]) -> dict[str, Any]:
    """A solver progress dict in the job's common shape.

    DC-SVM reports (``stage`` kmeans/level/refine/global/done, ``level``, ``objective``,
    ``max_violation`` ...) pass through; linear-CD reports get ``stage="solve"``,
    ``objective`` = their ``dual`` and ``max_violation`` = their ``violation``.
    """
    out = _finite(dict(report))
    if "stage" not in out:
        out["stage"] = "solve"
        if "dual" in out:
            out["objective"] = out["dual"]
        if "violation" in out:
            out["max_violation"] = out["violation"]
    return out


def run_training(task: dict[str, Any], progress: Callable[[dict], Any] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 stage: Callable[[str], Any] | None = None, *, label_indices: bool = True):
    """Load, fit and score one batch job (the worker's work; also ``svmstream train``).

    Parameters
    ----------
    task : dict
        ``algorithm``, ``data`` (path), optional ``data_format``, ``test`` (path),
        ``test_format``, ``params``, ``early_level``, ``default_n_jobs``.
    progress : callable(dict), optional
        Receives the solver's progress reports (see :func:`normalise_progress`).
    should_stop : callable() -> bool, optional
        Polled by the solver; True cancels (``Cancelled`` of the solver propagates).
    stage : callable(str), optional
        Told ``"loading"``, ``"training"``, ``"testing"`` as the job moves on.
    label_indices : bool
        Fit on class indices ``0..K-1`` (the service's convention: the registry maps them
        to the labels) instead of the file's labels.

    Returns
    -------
    estimator : fitted estimator
    result : dict
        ``n_train``, ``n_features``, ``classes`` (sorted labels), ``train_seconds`` (the
        ``fit`` call), ``load_seconds``, ``n_sv`` (DC-SVM; None for linear models),
        ``dual_objective``, ``gamma`` (DC-SVM), ``mode`` (exact/early/linear), and with a
        test file ``n_test``, ``test_accuracy``, ``test_seconds``, plus
        ``peak_rss_mb`` (this process) and ``peak_rss_children_mb`` (pool workers).

    Raises
    ------
    ValueError, OSError
        Invalid parameters, unreadable data, fewer than two classes.
    solvers.dual_cd.Cancelled, solvers.linear_cd.Cancelled
        When ``should_stop()`` returned True.
    """
    tell = stage or (lambda s: None)
    est = make_job_estimator(task["algorithm"], task.get("params"), task.get("early_level"),
                             default_n_jobs=task.get("default_n_jobs"))
    tell("loading")
    t0 = time.perf_counter()
    X, y = load_dataset(task["data"], fmt=task.get("data_format"))
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(f"{Path(task['data']).name}: the training data has a single class "
                         f"({_json_label(classes[0]) if classes.size else 'none'}); need at least 2")
    n, d = X.shape
    Xf = prepare_X(X)
    del X
    load_seconds = time.perf_counter() - t0
    tell("training")
    wrapped = None if progress is None else (lambda r: progress(normalise_progress(r)))
    t1 = time.perf_counter()
    est.fit(Xf, y_idx if label_indices else y, progress=wrapped, should_stop=should_stop)
    train_seconds = time.perf_counter() - t1
    del Xf
    result: dict[str, Any] = {
        "algorithm": task["algorithm"],
        "n_train": int(n), "n_features": int(d), "classes": [_json_label(c) for c in classes],
        "train_seconds": train_seconds, "load_seconds": load_seconds,
        "n_sv": _n_support_vectors(est),
        "dual_objective": [float(v) for v in np.atleast_1d(getattr(est, "dual_objective_", []))],
    }
    if task["algorithm"] == "dcsvm":
        result["gamma"] = float(est.kernel_spec_.gamma)
        result["mode"] = "early" if est.early_models_ is not None else "exact"
        if est.early_models_ is not None:
            result["early_level"] = int(est.early_models_[0].level)
            result["early_clusters"] = int(est.early_models_[0].clusters.n_clusters)
    else:
        result["mode"] = "linear"
        result["n_steps"] = [int(v) for v in est.n_steps_]
        result["n_iter"] = [int(v) for v in est.n_iter_]
        result["converged"] = bool(np.all(est.converged_))
    if task.get("test"):
        tell("testing")
        t2 = time.perf_counter()
        Xt, yt = load_dataset(task["test"], n_features=d, fmt=task.get("test_format"))
        pred = est.predict(prepare_X(Xt))
        labels = classes[np.asarray(pred, dtype=np.int64)] if label_indices else pred
        correct = int(np.sum(labels == yt))
        result.update(n_test=int(Xt.shape[0]), test_correct=correct, test_accuracy=correct / Xt.shape[0],
                      test_seconds=time.perf_counter() - t2)
    try:
        import resource

        result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result["peak_rss_children_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    except (ImportError, OSError):  # pragma: no cover - not Unix
        pass
    return est, result


# =============================================================================== worker process


class _Reporter:
    """Worker side of the progress pipe: forwards reports, at most one per
    :data:`PROGRESS_INTERVAL_S` unless the problem, stage or level changed."""

    def __init__(self, conn):
        self.conn = conn
        self._key: tuple | None = None
        self._last = 0.0
        self._pending: dict | None = None

    def send(self, message: dict) -> None:
        self.conn.send(message)

    def stage(self, name: str) -> None:
        self.flush()
        self.send({"type": "stage", "stage": name, "time": time.time()})

    def progress(self, report: dict) -> None:
        key = (report.get("problem"), report.get("stage"), report.get("level"))
        now = time.monotonic()
        if key != self._key:
            self.flush()  # the last figures of the previous stage first
        if key != self._key or now - self._last >= PROGRESS_INTERVAL_S or report.get("stage") == "done":
            self._key, self._last, self._pending = key, now, None
            self.send({"type": "progress", "progress": report, "time": time.time()})
        else:
            self._pending = report

    def flush(self) -> None:
        if self._pending is not None:
            report, self._pending = self._pending, None
            self.send({"type": "progress", "progress": report, "time": time.time()})


def worker_main(task: dict[str, Any], conn, stop_event) -> None:
    """Entry point of a job's worker process.

    Parameters
    ----------
    task : dict
        See :func:`run_training`, plus ``out_path`` (where the encoded model goes).
    conn : multiprocessing.connection.Connection
        Write end of the progress pipe; receives dicts with ``type`` = ``started``,
        ``stage``, ``progress``, then exactly one of ``result`` (with ``path``),
        ``cancelled`` or ``error`` (``error``: "ExceptionType: message", ``traceback``).
    stop_event : multiprocessing.Event
        Set by the server to cancel.  The job also stops if the server (the parent of the
        forkserver, or of this process with spawn) goes away.
    """
    try:
        os.setpgid(0, 0)  # own process group: a kill reaches DC-SVM's pool workers too
    except OSError:  # pragma: no cover
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when a job stops
    parent = os.getppid()
    reporter = _Reporter(conn)

    def should_stop() -> bool:
        return stop_event.is_set() or os.getppid() != parent

    from svmstream.solvers.dual_cd import Cancelled as KernelCancelled
    from svmstream.solvers.linear_cd import Cancelled as LinearCancelled

    try:
        reporter.send({"type": "started", "pid": os.getpid(), "time": time.time()})
        est, result = run_training(task, reporter.progress, should_stop, reporter.stage)
        reporter.flush()
        reporter.stage("saving")
        arrays, meta = est.get_state()
        write_atomic(task["out_path"], encode_state(arrays, meta))
        reporter.send({"type": "result", "result": _finite(result), "path": task["out_path"], "time": time.time()})
    except (KernelCancelled, LinearCancelled):
        reporter.send({"type": "cancelled", "time": time.time()})
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the server
        try:
            reporter.send({"type": "error", "error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc(limit=20), "time": time.time()})
        except OSError:
            pass
    finally:
        try:
            conn.close()
        except OSError:  # pragma: no cover
            pass


# =============================================================================== uploads


@dataclass
class UploadInfo:
    """A stored upload: ``<uploads dir>/<id>.<format><.bz2|.gz>``."""

    id: str
    path: Path
    format: str
    compression: str | None
    bytes: int
    created_at: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "format": self.format, "compression": self.compression, "bytes": self.bytes,
                "created_at": self.created_at, "filename": self.path.name}


class UploadStore:
    """Uploaded data files under ``root`` (created on demand).

    Parameters
    ----------
    root : Path
        Directory of the uploads (``<jobs_dir>/uploads``).
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def new_id(self) -> str:
        return "up-" + secrets.token_hex(10)

    def temp_path(self, upload_id: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / f".{upload_id}.part"

    def finish(self, upload_id: str, temp: Path, fmt: str | None = None, filename: str | None = None) -> UploadInfo:
        """Check a received temp file and give it its final name.

        ``fmt`` (``libsvm``/``csv``) overrides the detection from ``filename``'s extension
        and the first line of the content.

        Raises
        ------
        JobError
            422 for an empty file, an unknown format or content that is not a LIBSVM/CSV
            text (the temp file is removed).
        """
        try:
            size = temp.stat().st_size
            if size == 0:
                raise JobError("file: the upload is empty", field="file")
            with open(temp, "rb") as fh:
                head = fh.read(256 * 1024)
            compression, sniffed = sniff(head)
            if fmt is not None and fmt not in FORMATS:
                raise JobError(f"format: must be one of {', '.join(FORMATS)}, got {fmt!r}", field="format")
            by_name = None
            if filename:
                lower = filename.lower()
                for suffix in (".bz2", ".gz"):
                    if lower.endswith(suffix):
                        lower = lower[: -len(suffix)]
                by_name = "csv" if lower.endswith(".csv") else None
            chosen = fmt or by_name or sniffed
            if sniffed is None:
                what = f"{compression}-compressed data" if compression else "data"
                raise JobError(f"file: the {what} is not a LIBSVM or CSV text file (its first line is neither "
                               "'label index:value ...' nor comma-separated)", field="file")
            final = self.root / f"{upload_id}.{chosen}{COMPRESSIONS[compression]}"
            os.replace(temp, final)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return UploadInfo(upload_id, final, chosen, compression, size, final.stat().st_mtime)

    def get(self, upload_id: str) -> UploadInfo:
        """Raises :class:`JobError` (404) for an unknown id, 422 for a malformed one."""
        if not UPLOAD_ID_RE.match(upload_id or ""):
            raise JobError(f"upload id {upload_id!r} is malformed", field="upload", status=422)
        if self.root.is_dir():
            for entry in self.root.iterdir():
                if entry.name.startswith(upload_id + ".") and entry.is_file():
                    fmt, _, comp = entry.name[len(upload_id) + 1:].partition(".")
                    compression = {"bz2": "bz2", "gz": "gzip"}.get(comp)
                    st = entry.stat()
                    return UploadInfo(upload_id, entry, fmt, compression, st.st_size, st.st_mtime)
        raise JobError(f"upload {upload_id!r} not found", field="upload", status=404)

    def list(self) -> list[UploadInfo]:
        if not self.root.is_dir():
            return []
        out = []
        for entry in sorted(self.root.iterdir()):
            upload_id = entry.name.split(".", 1)[0]
            if UPLOAD_ID_RE.match(upload_id) and entry.is_file():
                out.append(self.get(upload_id))
        return out

    def delete(self, upload_id: str) -> None:
        """Raises :class:`JobError` (404) for an unknown id."""
        self.get(upload_id).path.unlink(missing_ok=True)


# =============================================================================== jobs


def resolve_data_ref(ref: str, what: str, data_dir: Path | None, uploads: UploadStore) -> tuple[Path, str]:
    """Turn a job's ``data``/``test`` value into ``(path, format)``.

    ``ref`` is an upload id (``up-`` + 20 hex digits) or a path inside ``data_dir``
    (relative to it, or absolute).

    Raises
    ------
    JobError
        403 when server paths are disabled (``data_dir`` unset), when the path contains
        ``..`` or resolves (symbolic links followed) outside ``data_dir``; 404 when the
        file or upload does not exist; 422 for an empty or NUL-containing value.
    """
    if not ref or "\x00" in ref:
        raise JobError(f"{what}: must be an upload id or a path in the data directory", field=what)
    if UPLOAD_ID_RE.match(ref):
        info = uploads.get(ref)
        return info.path, info.format
    if data_dir is None:
        raise JobError(f"{what}: server-side paths are disabled on this server (SVMSTREAM_DATA_DIR is not set); "
                       "upload the file with POST /uploads and pass its id", field=what, status=403)
    path = Path(ref)
    if ".." in path.parts:
        raise JobError(f"{what}: '..' is not allowed in a path (path traversal)", field=what, status=403)
    root = Path(data_dir).resolve()
    full = (path if path.is_absolute() else root / path).resolve()
    if not full.is_relative_to(root):
        raise JobError(f"{what}: {ref!r} is outside the server's data directory", field=what, status=403)
    if not full.is_file():
        raise JobError(f"{what}: no file {ref!r} in the server's data directory", field=what, status=404)
    return full, detect_format(full)


@dataclass
class Job:
    """One batch job (its public record is :meth:`to_json`)."""

    id: str
    algorithm: str
    model: str
    data: str
    test: str | None
    params: dict[str, Any]
    early_level: int | None
    replace: bool
    task: dict[str, Any]
    state: str = "queued"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    pid: int | None = None
    exitcode: int | None = None
    stage: str = "queued"
    progress: dict[str, Any] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: str | None = None
    error_traceback: str | None = None
    cancel: dict[str, Any] | None = None
    # private
    _cancel_requested: float | None = None  # monotonic time of the request
    _done: threading.Event = field(default_factory=threading.Event)
    _stop_event: Any = None
    _process: Any = None

    def to_json(self) -> dict[str, Any]:
        now = time.time()
        end = self.finished_at or now
        return {
            "id": self.id, "state": self.state, "algorithm": self.algorithm, "model": self.model,
            "data": self.data, "test": self.test, "params": self.params, "early_level": self.early_level,
            "replace": self.replace, "created_at": self.created_at, "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": None if self.started_at is None else round(end - self.started_at, 3),
            "pid": self.pid, "exitcode": self.exitcode,
            "progress": {**self.progress, "phase": self.stage,
                         "stage": self.progress.get("stage", self.stage) if self.stage == "training" else self.stage},
            "timeline": list(self.timeline),
            "result": self.result, "error": self.error, "cancel": self.cancel,
        }


class JobRunner:
    """Queue, worker processes and supervisors of the batch jobs of one server.

    Parameters
    ----------
    settings : Settings
        ``data_dir``, ``jobs_dir``, ``max_concurrent_jobs``, ``max_queued_jobs``,
        ``job_start_method``, ``job_cancel_grace_s``, ``job_history``,
        ``job_dcsvm_n_jobs``.
    registry : Registry
        Where finished jobs register their models.
    """

    def __init__(self, settings: "Settings", registry: "Registry"):
        self.settings = settings
        self.registry = registry
        self.jobs_dir = Path(settings.jobs_dir)
        self.results_dir = self.jobs_dir / "results"
        self.uploads = UploadStore(self.jobs_dir / "uploads")
        self._jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self._queue: collections.deque[Job] = collections.deque()
        self._running: dict[str, threading.Thread] = {}
        self._lock = threading.RLock()
        self._closed = False
        self._ctx = mp.get_context(settings.job_start_method)
        if settings.job_start_method == "forkserver":
            # imported once in the fork server; every worker forks with them loaded
            self._ctx.set_forkserver_preload(["svmstream.app.jobs.runner", "sklearn.datasets"])
        self._clean_results()

    def _clean_results(self) -> None:
        if self.results_dir.is_dir():
            for entry in self.results_dir.glob("*.svmstate*"):
                entry.unlink(missing_ok=True)

    # ------------------------------------------------------------------ public API
    def submit(self, algorithm: str, data: str, model: str, *, test: str | None = None,
               params: dict[str, Any] | None = None, early_level: int | None = None,
               replace: bool = False) -> Job:
        """Validate and queue a job.

        Returns
        -------
        Job
            In state ``queued`` (or ``running`` if a worker slot was free).

        Raises
        ------
        JobError
            422 invalid algorithm/parameters/model name; 403/404 for ``data``/``test``
            (see :func:`resolve_data_ref`); 409 when the model exists and ``replace`` is
            false, or another active job trains the same model; 503 when the queue is full
            or the server is shutting down.
        """
        from svmstream.app.models.registry import _NAME_RE

        params = dict(params or {})
        try:
            make_job_estimator(algorithm, params, early_level, default_n_jobs=self.settings.job_dcsvm_n_jobs)
        except ValueError as exc:
            raise JobError(f"params: {exc}", field="params") from None
        if not _NAME_RE.match(model or ""):
            raise JobError(f"model: invalid model name {model!r}: use 1-64 characters [A-Za-z0-9_.-], "
                           "starting alphanumeric", field="model")
        data_path, data_fmt = resolve_data_ref(data, "data", self.settings.data_dir, self.uploads)
        test_path = test_fmt = None
        if test:
            test_path, test_fmt = resolve_data_ref(test, "test", self.settings.data_dir, self.uploads)
        with self._lock:
            if self._closed:
                raise JobError("the server is shutting down; no new jobs", field=None, status=503)
            if model in self.registry and not replace:
                raise JobError(f"model: model {model!r} exists; pass \"replace\": true to replace it with the "
                               "job's result", field="model", status=409)
            for other in self._jobs.values():
                if other.model == model and other.state in ("queued", "running"):
                    raise JobError(f"model: job {other.id} is already training model {model!r}", field="model",
                                   status=409)
            if len(self._queue) >= self.settings.max_queued_jobs:
                raise JobError(f"{len(self._queue)} jobs are queued already; retry later", field=None, status=503)
            job_id = secrets.token_hex(8)
            task = {"algorithm": algorithm, "data": str(data_path), "data_format": data_fmt,
                    "test": None if test_path is None else str(test_path), "test_format": test_fmt,
                    "params": params, "early_level": early_level,
                    "default_n_jobs": self.settings.job_dcsvm_n_jobs,
                    "out_path": str(self.results_dir / f"{job_id}.svmstate")}
            job = Job(id=job_id, algorithm=algorithm, model=model, data=data, test=test, params=params,
                      early_level=early_level, replace=replace, task=task)
            self._jobs[job_id] = job
            self._queue.append(job)
            self._prune()
            log.info("job %s: queued (%s on %s -> model %r)", job_id, algorithm, data, model)
            self._dispatch()
        return job

    def get(self, job_id: str) -> Job:
        """Raises :class:`JobError` (404)."""
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError(f"job {job_id!r} not found", field=None, status=404)
        return job

    def list(self) -> list[Job]:
        """All known jobs, newest first."""
        with self._lock:
            return list(reversed(self._jobs.values()))

    def to_json(self, job: Job) -> dict[str, Any]:
        with self._lock:
            return job.to_json()

    def cancel(self, job_id: str, wait: float | None = None) -> Job:
        """Cancel a queued or running job; returns it once it has stopped.

        A queued job is dropped at once.  A running job's stop event is set; its
        supervisor kills the worker's process group if it has not exited
        ``job_cancel_grace_s`` later.  This call waits for that (at most ``wait`` seconds,
        default grace + 10 s).

        Raises
        ------
        JobError
            404 unknown job; 409 when the job has already finished.
        """
        job = self.get(job_id)
        with self._lock:
            if job.state in FINISHED:
                raise JobError(f"job {job_id} already {job.state}", field=None, status=409)
            if job._cancel_requested is None:
                job._cancel_requested = time.monotonic()
                job.cancel = {"requested_at": time.time(), "stopped_after_s": None, "killed": False}
            if job.state == "queued":
                self._queue.remove(job)
                self._finish(job, "cancelled", error=None)
                return job
            if job._stop_event is not None:
                job._stop_event.set()
        job._done.wait(self.settings.job_cancel_grace_s + 10.0 if wait is None else wait)
        return job

    def stop(self) -> None:
        """Server shutdown: drop queued jobs and cancel (at worst kill) running ones."""
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            running = [j for j in self._jobs.values() if j.state == "running"]
        for job in queued + running:
            try:
                self.cancel(job.id)
            except JobError:
                pass
        for thread in list(self._running.values()):
            thread.join(timeout=self.settings.job_cancel_grace_s + 10.0)

    # ------------------------------------------------------------------ internals
    def _prune(self) -> None:
        finished = [j for j in self._jobs.values() if j.state in FINISHED]
        for job in finished[: max(0, len(finished) - self.settings.job_history)]:
            del self._jobs[job.id]

    def _dispatch(self) -> None:
        with self._lock:
            while self._queue and len(self._running) < self.settings.max_concurrent_jobs and not self._closed:
                job = self._queue.popleft()
                job.state = "running"
                job.stage = "starting"
                job.started_at = time.time()
                thread = threading.Thread(target=self._supervise, args=(job,), name=f"job-{job.id}", daemon=True)
                self._running[job.id] = thread
                thread.start()

    def _finish(self, job: Job, state: str, *, error: str | None) -> None:
        with self._lock:
            job.state = state
            job.error = error
            job.finished_at = time.time()
            job.stage = "done" if state == "succeeded" else state
            if state == "cancelled":
                if job.cancel is not None and job._cancel_requested is not None:
                    job.cancel["stopped_after_s"] = round(time.monotonic() - job._cancel_requested, 4)
            self._running.pop(job.id, None)
            job._stop_event = None  # release the semaphores of the event and the process handle
            job._process = None
        job._done.set()
        level = logging.INFO if state == "succeeded" else logging.WARNING
        log.log(level, "job %s: %s%s", job.id, state, f" ({error})" if error else "")
        self._dispatch()

    def _on_message(self, job: Job, msg: dict[str, Any]) -> None:
        kind = msg.get("type")
        with self._lock:
            if kind == "started":
                job.pid = msg.get("pid")
            elif kind == "stage":
                job.stage = msg["stage"]
                self._timeline(job, {"stage": msg["stage"]}, msg.get("time"))
            elif kind == "progress":
                report = msg["progress"]
                job.progress = report
                self._timeline(job, report, msg.get("time"))

    def _timeline(self, job: Job, report: dict[str, Any], at: float | None) -> None:
        """One timeline entry per (problem, stage, level); the latest figures overwrite."""
        key = (report.get("problem"), report.get("stage"), report.get("level"))
        t = round((at or time.time()) - (job.started_at or job.created_at), 3)
        entry = {k: report[k] for k in ("problem", "n_problems", "stage", "level", "n_clusters", "objective",
                                        "max_violation", "subproblems_done", "subproblems", "iteration",
                                        "iterations", "n_steps", "selection")
                 if report.get(k) is not None}
        last = job.timeline[-1] if job.timeline else None
        if last is not None and (last.get("problem"), last.get("stage"), last.get("level")) == key:
            last.update(entry)
            last["last_s"] = t
        elif len(job.timeline) < MAX_TIMELINE:
            job.timeline.append({**entry, "start_s": t, "last_s": t})

    def _kill(self, job: Job) -> None:
        proc = job._process
        if proc is None:
            return
        pid = proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)  # the worker leads its own group (its pool workers too)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            proc.kill()
        except (OSError, ValueError, AttributeError):
            pass

    def _supervise(self, job: Job) -> None:
        """Supervisor thread: start the worker, relay its messages, finish the job."""
        outcome: dict[str, Any] | None = None
        proc = None
        reader = None
        try:
            self.results_dir.mkdir(parents=True, exist_ok=True)
            reader, writer = self._ctx.Pipe(duplex=False)
            stop_event = self._ctx.Event()
            proc = self._ctx.Process(target=worker_main, args=(job.task, writer, stop_event),
                                     name=f"svmstream-job-{job.id}", daemon=False)
            with self._lock:
                job._stop_event = stop_event
                if job._cancel_requested is not None:
                    stop_event.set()
            proc.start()
            writer.close()
            with self._lock:
                job._process = proc
                job.pid = proc.pid
            log.info("job %s: worker pid %d started", job.id, proc.pid)
            grace = self.settings.job_cancel_grace_s
            killed = False
            while True:
                if job._cancel_requested is not None and not killed and time.monotonic() - job._cancel_requested > grace:
                    log.warning("job %s: worker did not stop within %.1f s of the cancel; killing it", job.id, grace)
                    self._kill(job)
                    killed = True
                    with self._lock:
                        if job.cancel is not None:
                            job.cancel["killed"] = True
                try:
                    if not reader.poll(0.05):
                        if not proc.is_alive():
                            if not reader.poll(0.2):  # a last message may still be in the pipe
                                break
                        continue
                    msg = reader.recv()
                except (EOFError, OSError):
                    break
                if msg.get("type") in ("result", "cancelled", "error"):
                    outcome = msg
                    with self._lock:
                        if msg["type"] == "cancelled" and job.cancel is not None:
                            # when the solver raised Cancelled (wall clock of the worker)
                            job.cancel["solver_stopped_after_s"] = round(msg["time"] - job.cancel["requested_at"], 4)
                else:
                    self._on_message(job, msg)
            proc.join(timeout=grace + 5.0)
            if proc.is_alive():  # closed its pipe but did not exit
                self._kill(job)
                proc.join(timeout=5.0)
            job.exitcode = proc.exitcode
        except Exception as exc:  # noqa: BLE001 - the job fails, the server stays up
            log.exception("job %s: supervisor error", job.id)
            if proc is not None and proc.is_alive():
                self._kill(job)
            self._finish(job, "failed", error=f"job runner error: {type(exc).__name__}: {exc}")
            return
        finally:
            if reader is not None:
                reader.close()
            if proc is not None:
                # reap the pool workers of a killed DC-SVM worker as well
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError, OSError):
                    pass
        self._conclude(job, outcome)

    def _conclude(self, job: Job, outcome: dict[str, Any] | None) -> None:
        out_path = Path(job.task["out_path"])
        try:
            if job._cancel_requested is not None:
                self._finish(job, "cancelled", error=None)
                return
            if outcome is None:
                self._finish(job, "failed", error=_exit_reason(job.exitcode))
                return
            if outcome["type"] == "cancelled":  # the worker stopped on its own (server went away)
                self._finish(job, "cancelled", error=None)
                return
            if outcome["type"] == "error":
                with self._lock:
                    job.error_traceback = outcome.get("traceback")
                self._finish(job, "failed", error=outcome.get("error") or "worker error")
                return
            try:
                self._register(job, outcome["result"], out_path)
            except Exception as exc:  # noqa: BLE001
                log.exception("job %s: registering the model failed", job.id)
                self._finish(job, "failed", error=f"registering model {job.model!r} failed: {type(exc).__name__}: {exc}")
                return
            self._finish(job, "succeeded", error=None)
        finally:
            out_path.unlink(missing_ok=True)

    def _register(self, job: Job, result: dict[str, Any], out_path: Path) -> None:
        """Decode the worker's model and make it a servable model of the registry."""
        arrays, meta = decode_state(out_path.read_bytes())
        estimator = estimator_from_state(arrays, meta)
        if job.model in self.registry and not job.replace:
            raise RuntimeError(f"model {job.model!r} was created while the job ran; pass replace=true")
        fields: dict[str, Any] = {"algorithm": job.algorithm, "classes": result["classes"],
                                  "n_features": result["n_features"], "n_samples": result["n_train"]}
        if job.algorithm == "dcsvm":
            fields.update(C=float(estimator.C), gamma=float(result["gamma"]))
        else:
            fields.update(C=float(estimator.C))
        config = self.registry.resolve_config(fields)
        summary = {
            "id": job.id, "algorithm": job.algorithm, "params": job.params, "early_level": job.early_level,
            "data": job.data, "test": job.test, "trained_at": time.time(),
            **{k: result.get(k) for k in ("mode", "n_train", "n_sv", "train_seconds", "test_accuracy", "n_test",
                                          "dual_objective", "gamma", "early_clusters") if k in result},
        }
        handle, replaced = self.registry.create(job.model, config, snapshot=True, estimator=estimator, version=1,
                                                n_features=int(result["n_features"]), extra={"job": summary})
        with self._lock:
            job.result = {"model": job.model, "replaced": replaced, "version": handle.view.version, **result}


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the worker process did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the worker process was killed by {name} (exit status {code}) before it reported a result"
    return f"the worker process exited with status {code} without reporting a result"
