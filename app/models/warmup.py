"""Solver warm-up: run every code path the service uses once, in the background.

A fresh install has an empty numba cache: compiling every kernel took 16.5 s before
``/health`` answered (issue 17; 127 s on this machine under load).  The service now answers
at once and compiles in a background thread (:class:`WarmUp`), logging each stage; a
request that needs a kernel still being compiled waits for it (numba compiles a function
once, under its compiler lock) and the log says so (:meth:`WarmUp.note_waiting`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from svmstream.app.models.config import ModelConfig
from svmstream.app.models.factory import make_estimator

log = logging.getLogger("svmstream.warmup")


def warm_up(stage: Callable[[str], None] | None = None) -> None:
    """Run every solver code path once on a tiny problem so that the numba kernels are
    compiled (or loaded from the on-disk cache).  ``stage(description)`` is called before
    each group of kernels."""
    stage = stage or (lambda _: None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 3))
    y = np.tile([0, 1], 4)
    for rows, kind in ((X, "dense"), (sp.csr_matrix(X), "sparse")):
        # a small window and buffer: the window closes, rows pass the buffer and the guard
        for kernel in ("rbf", "linear"):  # linear: dense rows, and sparse rows held sparse
            stage(f"BSGD kernel={kernel}, {kind} rows: learning, buffer, guard, prediction")
            est = make_estimator(
                ModelConfig(budget=2, warmup=4, shuffle_buffer=2, random_state=0, kernel=kernel)
            )
            est.partial_fit(rows, y, classes=np.arange(2))
            est.flush()
            est.published_copy().decision_function(rows)
    # batches of >= 32 rows take the blocked BLAS path of dense pools (solvers/budgeted/_decision.py)
    stage("BSGD blocked batch prediction")
    est = make_estimator(ModelConfig(budget=2, warmup=4, shuffle_buffer=2, random_state=0))
    est.partial_fit(X, y, classes=np.arange(2)).flush()
    est.published_copy().decision_function(np.repeat(X, 8, axis=0))
    # sparse support vectors (wide sparse input, sv_storage "auto" -> "sparse"): ~12 CPU s of
    # kernels on an empty numba cache
    rows = sp.csr_matrix(X)
    for algorithm in ("bsgd", "bsca"):
        stage(f"{algorithm.upper()} with sparse support vectors")
        config = ModelConfig(algorithm=algorithm, budget=2, warmup=4, shuffle_buffer=2, sv_storage="sparse")
        est = make_estimator(config).partial_fit(rows, y, classes=np.arange(2)).flush()
        est.published_copy().decision_function(rows)
    # the lookup-table merge solvers build their (H, WD) tables once per process (~0.5 s):
    # do it now rather than in the first batch of a lookup-wd model; and BSCA's step
    stage("lookup-WD merge tables and BSCA")
    for config in (ModelConfig(budget=2, merge_solver="lookup-wd"), ModelConfig(algorithm="bsca", budget=2)):
        make_estimator(config).partial_fit(X, y, classes=np.arange(2)).flush()


class WarmUp:
    """:func:`warm_up` on a background thread, with its progress.

    Attributes
    ----------
    done : threading.Event — set when the warm-up ended (also after an error)
    stage : str — what is being compiled now
    seconds : float or None — how long it took, once done
    """

    def __init__(self):
        self.done = threading.Event()
        self.stage = "starting"
        self.seconds: float | None = None
        self._started = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="solver-warm-up", daemon=True)

    def start(self) -> WarmUp:
        """Start the thread; this warm-up becomes the one :func:`note_waiting` reports on."""
        global _CURRENT
        _CURRENT = self
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def _stage(self, description: str) -> None:
        self.stage = description
        log.info("compiling solver kernels (or loading them from numba's cache): %s", description)

    def _run(self) -> None:
        try:
            warm_up(self._stage)
            self.seconds = time.perf_counter() - self._started
            log.info("solver warm-up done in %.2f s", self.seconds)
        except Exception:  # a warm-up failure must not stop the service: requests compile lazily
            log.exception("solver warm-up failed; kernels compile on first use")
        finally:
            self.done.set()

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


_CURRENT: WarmUp | None = None


def warm_up_status() -> str:
    """``"compiling"`` while this process's warm-up runs, else ``"ready"`` (also without one)."""
    return "compiling" if _CURRENT is not None and not _CURRENT.done.is_set() else "ready"


def note_waiting(what: str) -> None:
    """Log that ``what`` may wait for kernels the running warm-up is still compiling (nothing
    once it is done, or when no warm-up was started in this process)."""
    if _CURRENT is not None:
        _CURRENT.note_waiting(what)
