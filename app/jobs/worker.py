"""The work of a batch job: load, fit, score (:func:`run_training`), in a worker process
(:func:`worker_main`) or in ``svmstream train``.

A worker receives the job as a plain dict (the **path** of the data, never arrays), loads the
file itself (:func:`svmstream.app.jobs.datasets.load_dataset`), fits, scores the optional
test file, and writes the model with :func:`svmstream.solvers.persistence.encode_state` to the
task's ``out_path`` (pickle-free).  Progress and the final outcome travel as small dicts over a
one-way :func:`multiprocessing.Pipe` (:class:`_Reporter`: no feeder thread in the worker, so
DC-SVM's fork pool forks a single-threaded process).  The worker leads its own process group
(a kill reaches DC-SVM's pool workers too) and stops by itself when the server goes away.

The server side (queue, supervisor threads, registration) is
:class:`svmstream.app.jobs.runner.JobRunner`; see ``docs/jobs.md``.
"""

from __future__ import annotations

import math
import os
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from svmstream.app.jobs.bounds import worker_n_jobs
from svmstream.app.jobs.datasets import load_dataset, prepare_X
from svmstream.app.models.factory import make_job_estimator
from svmstream.solvers import Cancelled
from svmstream.solvers.calibration import expected_calibration_error
from svmstream.solvers.persistence import encode_state, write_atomic

PROGRESS_INTERVAL_S = 0.2
"""The worker forwards at most one progress report per this interval (plus every change
of problem, stage or level)."""


def _json_label(value: Any) -> int | float | str:
    if isinstance(value, (str, np.str_)):  # CSV files may label rows with strings
        return str(value)
    value = float(value)
    return int(value) if value.is_integer() else value


def _n_support_vectors(est, algorithm: str) -> int | None:
    """A DC-SVM's support vectors (its early models' when it serves a level's), None for the
    linear models (they keep weights)."""
    if algorithm != "dcsvm":
        return None
    if est.early_models_ is not None:
        return int(sum(m.sv.n_samples for m in est.early_models_))
    return int(len(est.support_))


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


def _job_estimator(task: dict[str, Any]):
    """The task's unfitted estimator, with ``n_jobs`` (if it has one) at most the cores of this
    machine: never a pool larger than the machine (docs/service.md;
    :func:`svmstream.app.jobs.bounds.worker_n_jobs`)."""
    est = make_job_estimator(
        task["algorithm"],
        task.get("params"),
        task.get("early_level"),
        default_n_jobs=task.get("default_n_jobs"),
    )
    if "n_jobs" in est.get_params(deep=False):
        est.set_params(n_jobs=worker_n_jobs(est.n_jobs))
    return est


def run_training(
    task: dict[str, Any],
    progress: Callable[[dict], Any] | None = None,
    should_stop: Callable[[], bool] | None = None,
    stage: Callable[[str], Any] | None = None,
    *,
    label_indices: bool = True,
):
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
        ``dual_objective``, ``gamma`` (DC-SVM), ``mode`` (exact/early/linear),
        ``calibration`` ("held-out", "held-out-refit", "in-sample"; None without
        ``probability``),
        ``calibration_rows``, ``calibration_slope``, and with a test file ``n_test``,
        ``test_accuracy``, ``test_seconds`` and (calibrated models) ``test_log_loss``,
        ``test_ece``, plus ``peak_rss_mb`` (this process) and ``peak_rss_children_mb`` (pool
        workers).

    Raises
    ------
    ValueError, OSError
        Invalid parameters, unreadable data, fewer than two classes.
    svmstream.solvers.Cancelled
        When ``should_stop()`` returned True.
    """
    tell = stage or (lambda s: None)
    est = _job_estimator(task)
    tell("loading")
    t0 = time.perf_counter()
    Xf, y, classes, y_idx = _load_training(task["data"], task.get("data_format"))
    n, d = Xf.shape
    load_seconds = time.perf_counter() - t0
    tell("training")
    wrapped = None if progress is None else (lambda r: progress(normalise_progress(r)))
    t1 = time.perf_counter()
    est.fit(Xf, y_idx if label_indices else y, progress=wrapped, should_stop=should_stop)
    train_seconds = time.perf_counter() - t1
    del Xf
    result: dict[str, Any] = {
        "algorithm": task["algorithm"],
        "n_train": int(n),
        "n_features": int(d),
        "classes": [_json_label(c) for c in classes],
        "train_seconds": train_seconds,
        "load_seconds": load_seconds,
        "n_sv": _n_support_vectors(est, task["algorithm"]),
        "dual_objective": [float(v) for v in np.atleast_1d(est.dual_objective_)],
        **_model_summary(est, task["algorithm"]),
    }
    if task.get("test"):
        tell("testing")
        result.update(_score_test(est, task, d, classes, label_indices))
    result.update(_peak_rss())
    return est, result


def _load_training(path: str, fmt: str | None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """``(X for the solver, labels, sorted classes, class index per row)`` of a training file
    (:class:`ValueError` for fewer than two classes)."""
    X, y = load_dataset(path, fmt=fmt)
    classes, y_idx = np.unique(y, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"{Path(path).name}: the training data has a single class "
            f"({_json_label(classes[0]) if classes.size else 'none'}); need at least 2"
        )
    return prepare_X(X), y, classes, y_idx


def _calibration_summary(est) -> dict[str, Any]:
    """Which decision values the probabilities were calibrated on, how many, and the slope."""
    calibrator = est.calibrator_  # None without probability
    return {
        "calibration": est.calibration_,
        "calibration_rows": None if calibrator is None else int(calibrator.n_fitted_),
        "calibration_slope": None if calibrator is None else float(calibrator.slope_),
    }


def _model_summary(est, algorithm: str) -> dict[str, Any]:
    """The algorithm-specific figures of a fitted estimator (mode, gamma, steps ...) and its
    calibration."""
    out: dict[str, Any] = _calibration_summary(est)
    if algorithm == "dcsvm":
        out["gamma"] = float(est.kernel_spec_.gamma)
        out["mode"] = "early" if est.early_models_ is not None else "exact"
        if est.early_models_ is not None:
            out["early_level"] = int(est.early_models_[0].level)
            out["early_clusters"] = int(est.early_models_[0].clusters.n_clusters)
        return out
    return {
        **out,
        "mode": "linear",
        "n_steps": [int(v) for v in est.n_steps_],
        "n_iter": [int(v) for v in est.n_iter_],
        "converged": bool(np.all(est.converged_)),
    }


def _score_test(
    est, task: dict[str, Any], d: int, classes: np.ndarray, label_indices: bool
) -> dict[str, Any]:
    """Accuracy of ``est`` on the task's test file (read with the training width ``d``), and
    for a calibrated model the log-loss and ECE of its probabilities (over the test rows whose
    label the model knows; None if there are none)."""
    t2 = time.perf_counter()
    Xt, yt = load_dataset(task["test"], n_features=d, fmt=task.get("test_format"))
    Xt = prepare_X(Xt)
    out: dict[str, Any] = {}
    if est.probability:  # predict_proba exists (available_if)
        proba = est.predict_proba(Xt)
        # the argmax of every row is the predicted class (MarginCalibrator's guarantee), so
        # the decision values are computed once
        pred = est.classes_[np.argmax(proba, axis=1)]
        index = np.minimum(np.searchsorted(classes, yt), classes.shape[0] - 1)
        known = classes[index] == yt
        p_true = np.clip(proba[known, index[known]], 1e-15, 1.0)
        out["test_log_loss"] = float(-np.mean(np.log(p_true))) if known.any() else None
        out["test_ece"] = expected_calibration_error(proba[known], index[known]) if known.any() else None
    else:
        pred = est.predict(Xt)
    labels = classes[np.asarray(pred, dtype=np.int64)] if label_indices else pred
    correct = int(np.sum(labels == yt))
    return dict(
        n_test=int(Xt.shape[0]),
        test_correct=correct,
        test_accuracy=correct / Xt.shape[0],
        **out,
        test_seconds=time.perf_counter() - t2,
    )


def _peak_rss() -> dict[str, float]:
    """``peak_rss_mb`` of this process and ``peak_rss_children_mb`` of its (pool) children."""
    try:
        import resource  # Unix only

        return {
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "peak_rss_children_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
    except (ImportError, OSError):  # pragma: no cover - not Unix
        return {}


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


def run_job(task: dict[str, Any], reporter, should_stop: Callable[[], bool], *, client=None):
    """A training job (:func:`run_training`) or a search job
    (:func:`svmstream.app.jobs.search.run_search`), reporting to ``reporter``
    (``progress``, ``stage``, ``flush``); ``client``: the dask cluster to run on (joblib's
    dask backend around the fit).  Returns ``(estimator, result)``."""
    if task["algorithm"] == "search":
        from svmstream.app.jobs.search import run_search

        return run_search(task, reporter.stage, client=client)
    if client is None:
        est, result = run_training(task, reporter.progress, should_stop, reporter.stage)
    else:
        import joblib

        with joblib.parallel_backend("dask", client=client):
            est, result = run_training(task, reporter.progress, should_stop, reporter.stage)
    reporter.flush()
    return est, result


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

    try:
        reporter.send({"type": "started", "pid": os.getpid(), "time": time.time()})
        est, result = run_job(task, reporter, should_stop)
        reporter.stage("saving")
        arrays, meta = est.get_state()
        write_atomic(task["out_path"], encode_state(arrays, meta))
        reporter.send(
            {"type": "result", "result": _finite(result), "path": task["out_path"], "time": time.time()}
        )
    except Cancelled:
        reporter.send({"type": "cancelled", "time": time.time()})
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the server
        try:
            reporter.send(
                {
                    "type": "error",
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=20),
                    "time": time.time(),
                }
            )
        except OSError:
            pass
    finally:
        try:
            conn.close()
        except OSError:  # pragma: no cover
            pass
