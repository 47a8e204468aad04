"""Solver warm-up: run the code paths the service's models use once, in the background.

A fresh install has an empty numba cache: compiling every kernel took 16.5 s before
``/health`` answered (127 s on this machine under load).  The service now answers
at once and compiles in a background thread (:class:`WarmUp`), logging each stage; a
request that needs a kernel still being compiled waits for it (numba compiles a function
once, under its compiler lock) and the log says so (:meth:`WarmUp.note_waiting`).

The kernels come in groups (:data:`GROUPS`; :func:`groups_of` a configuration).  At start the
service warms the groups of its default configuration and of the restored models
(:func:`start_warm_up`); a model created later with another group (a BSCA model, the linear
kernel, a lookup merge solver) starts that group's warm-up then (:func:`warm_for`), with the
same log lines.  Each group loaded costs memory for good (numba's compiled code: with a warm
cache, the default BSGD groups 57 MB, all groups 69 MB, most of it numba's own start), so a
service whose models never use a group does not load it.  ``warm_up()`` without groups runs
them all (the image build fills numba's cache with it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np
import scipy.sparse as sp

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator

log = logging.getLogger("svmstream.warmup")

#: The kernel groups, in the order :func:`warm_up` runs them: ``bsgd`` (the RBF kernel's
#: learning and prediction, dense and sparse rows and support vectors), ``linear`` (BSGD with
#: the linear kernel), ``bsca``, ``lookup`` (the lookup-table merge solvers' tables).
GROUPS = ("bsgd", "linear", "bsca", "lookup")


def groups_of(config: ModelConfig) -> set[str]:
    """The kernel groups a model of ``config`` uses (none for batch-trained models)."""
    groups = set()
    if config.algorithm == "bsca":
        groups.update(("bsgd", "bsca"))  # BSCA predicts with the RBF kernels of BSGD
    elif config.algorithm == "bsgd":
        groups.add("linear" if config.kernel == "linear" else "bsgd")
    if config.algorithm in ("bsgd", "bsca") and config.merge_solver.startswith("lookup"):
        groups.add("lookup")
    return groups


def warm_up(stage: Callable[[str], None] | None = None, groups: Iterable[str] | None = None) -> None:
    """Run the solver code paths of ``groups`` (default: all of :data:`GROUPS`) once on a tiny
    problem so that the numba kernels are compiled (or loaded from the on-disk cache).
    ``stage(description)`` is called before each group of kernels."""
    stage = stage or (lambda _: None)
    wanted = set(GROUPS if groups is None else groups)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.tile([0, 1], 4)
    rows = sp.csr_matrix(X)
    for kernel in ("rbf", "linear"):
        if ("bsgd" if kernel == "rbf" else "linear") not in wanted:
            continue
        for data, kind in ((X, "dense"), (rows, "sparse")):
            # a small window and buffer: the window closes, rows pass the buffer and the guard
            # (linear: dense rows, and sparse rows held sparse)
            stage(f"BSGD kernel={kernel}, {kind} rows: learning, buffer, guard, prediction")
            est = make_estimator(
                ModelConfig(budget=2, warmup=4, shuffle_buffer=2, random_state=0, kernel=kernel)
            )
            est.partial_fit(data, y, classes=np.arange(2))
            est.flush()
            est.published_copy().decision_function(data)
    if "bsgd" in wanted:
        # batches of >= 32 rows take the blocked BLAS path of dense pools (solvers/budgeted/_decision.py)
        stage("BSGD blocked batch prediction")
        est = make_estimator(ModelConfig(budget=2, warmup=4, shuffle_buffer=2, random_state=0))
        est.partial_fit(X, y, classes=np.arange(2)).flush()
        est.published_copy().decision_function(np.repeat(X, 8, axis=0))
    # sparse support vectors (wide sparse input, sv_storage "auto" -> "sparse"): ~12 CPU s of
    # kernels on an empty numba cache
    for algorithm in ("bsgd", "bsca"):
        if algorithm in wanted:
            stage(f"{algorithm.upper()} with sparse support vectors")
            config = ModelConfig(
                algorithm=algorithm, budget=2, warmup=4, shuffle_buffer=2, sv_storage="sparse"
            )
            est = make_estimator(config).partial_fit(rows, y, classes=np.arange(2)).flush()
            est.published_copy().decision_function(rows)
    # the lookup-table merge solvers build their (H, WD) tables once per process (~0.5 s):
    # do it now rather than in the first batch of a lookup-wd model; and BSCA's step
    if "lookup" in wanted:
        stage("lookup-WD merge tables")
        make_estimator(ModelConfig(budget=2, merge_solver="lookup-wd")).partial_fit(
            X, y, classes=np.arange(2)
        ).flush()
    if "bsca" in wanted:
        stage("BSCA")
        make_estimator(ModelConfig(algorithm="bsca", budget=2)).partial_fit(
            X, y, classes=np.arange(2)
        ).flush()


class WarmUp:
    """:func:`warm_up` of some groups (default: all) on a background thread, with its progress.

    Attributes
    ----------
    groups : tuple of str — the groups it runs
    done : threading.Event — set when the warm-up ended (also after an error)
    stage : str — what is being compiled now
    seconds : float or None — how long it took, once done
    """

    def __init__(self, groups: Iterable[str] | None = None):
        self.groups = tuple(g for g in GROUPS if groups is None or g in set(groups))
        self.done = threading.Event()
        self.stage = "starting"
        self.seconds: float | None = None
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="solver-warm-up", daemon=True)

    def start(self) -> WarmUp:
        """Start the thread; :func:`note_waiting` reports on this warm-up until it is done."""
        with _LOCK:
            _STARTED.update(self.groups)
            _RUNNING.append(self)
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def _stage(self, description: str) -> None:
        self.stage = description
        log.info("compiling solver kernels (or loading them from numba's cache): %s", description)

    def _run(self) -> None:
        try:
            warm_up(self._stage, self.groups)
            self.seconds = time.perf_counter() - self._started
            log.info("solver warm-up done in %.2f s (%s)", self.seconds, ", ".join(self.groups))
        except Exception:  # a warm-up failure must not stop the service: requests compile lazily
            log.exception("solver warm-up failed; kernels compile on first use")
        finally:
            self.done.set()
            with _LOCK:
                if self in _RUNNING:
                    _RUNNING.remove(self)

    def note_waiting(self, what: str) -> None:
        """Log that ``what`` (a request) may wait for kernels still being compiled."""
        if not self.done.is_set():
            log.info(
                "%s waits for the solver kernels being compiled (%s; %.1f s so far)",
                what,
                self.stage,
                time.perf_counter() - self._started,
            )

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)


_LOCK = threading.Lock()
_RUNNING: list[WarmUp] = []
#: groups warmed (or being warmed) in this process; empty: no warm-up was started here
_STARTED: set[str] = set()


def start_warm_up(configs: Iterable[ModelConfig]) -> WarmUp:
    """The service's warm-up at start: the groups the given configurations use (the default
    one, the restored models'), on a background thread.  From then on :func:`warm_for` warms
    the groups of models created later."""
    groups: set[str] = set()
    for config in configs:
        groups |= groups_of(config)
    return WarmUp(groups).start()


def warm_for(config: ModelConfig) -> WarmUp | None:
    """Start the warm-up of the groups ``config`` uses that this process has not warmed yet,
    if the service started its warm-up (:func:`start_warm_up`; nothing otherwise, e.g. with
    ``SVMSTREAM_WARM_UP=false``).  Returns the warm-up started, or None."""
    with _LOCK:
        if not _STARTED:
            return None
        missing = groups_of(config) - _STARTED
        if not missing:
            return None
        _STARTED.update(missing)  # claimed now: two models of a new group start one warm-up
    return WarmUp(missing).start()


def warm_up_status() -> str:
    """``"compiling"`` while a warm-up of this process runs, else ``"ready"`` (also without one)."""
    return "compiling" if _RUNNING else "ready"


def wait_for_warm_up(what: str) -> None:
    """Block until every warm-up running in this process is done, logging that ``what`` waits.

    A learner thread calls it before each step: numba's first compilations of a kernel in two
    threads at once are not safe (a CI run's first ``/learn`` failed with "dictionary changed
    size during iteration" while the warm-up compiled beside it), so a step never runs beside
    a warm-up.  Returns at once when none runs.  (Predictions only log, :func:`note_waiting`:
    they may run on the event loop, and a model predicts only after a learner step.)"""
    for warm in list(_RUNNING):
        warm.note_waiting(what)
        warm.wait()


def note_waiting(what: str) -> None:
    """Log that ``what`` may wait for kernels a running warm-up is still compiling (nothing
    once they are done, or when no warm-up was started in this process)."""
    for warm in list(_RUNNING):
        warm.note_waiting(what)
