"""Drift detection on the prequential 0/1 error stream of an online classifier.

:class:`DriftMonitor` is fed one bool per learned example, in stream order: ``True`` when the
model, *before* learning the example, misclassified it (test-then-train).  It reports where
the error rate **increased** significantly, i.e. a concept drift that hurts the model.  A
falling error rate (the learning curve of a model that is still learning) is never reported.

Detector: one-sided ADWIN
-------------------------
The test is river's ADWIN (:class:`river.drift.ADWIN`, whose core is compiled Rust; Bifet &
Gavaldà 2007, "Learning from time-changing data with adaptive windowing", SIAM SDM).  ADWIN
keeps the recent errors in exponential buckets; whenever some split of its window into an
older part W0 and a recent part W1 has significantly different means (a Bernstein-type bound
at confidence ``delta``), it drops W0.  ADWIN is two-sided, so this class decides the
direction: a detection is reported only if the kept part errs more than the dropped part,
``mean(W1) > mean(W0)`` (compared exactly, in integers).  The window then:

* after a reported increase, restarts empty (as river's ADWIN does after every detection):
  W1 may still hold examples from before the change, and keeping them let each later test
  cut a few more of them (6-10 detections of one abrupt ijcnn1 flip instead of 1);
* after an ignored decrease, keeps W1 (the published algorithm; we drive the Rust core
  ``ADWIN._helper`` for this).  Restarting empty there, as river's wrapper does, forgets the
  recent examples too: when the test that a jump triggers is taken for a decrease (W0 still
  holds the early, high errors of the learning curve), the jump's first examples go with the
  window and the rest looks stationary.  After synthetic learning curves of 50,000 examples
  (0.5 or 0.3 -> 0.03, or 0.4 -> 0.15) followed by a jump (to 0.1, 0.2, 0.25 or 0.35; 7
  scenarios x 40 seeds, default ``delta``), the restart never reported 1-2 of the 40 jumps of
  4 scenarios within 20,000 examples; keeping W1 detected every one (median delay 0-30%
  longer).

Every example is tested (``clock=1``; river's default 32 adds up to 31 examples of delay
for no fewer false alarms, table below).

Why ADWIN: among river's detectors it is the only one measured with no false alarm on any
real, learning-curve or stationary stream that still detects every flip (16-19 examples on
ijcnn1, 70-175 on a9a, whose flipped error is lower), at 0.5 µs per example.  Run as river ships it, ADWIN fires on every learning curve (two-sided).  DDM
takes 400-2,000 examples and missed the a9a flip; HDDM_A (one-sided by design) raised false
alarms at confidence 1e-3 and 1e-4 and missed a9a flips at 1e-5; HDDM_W at 1e-5, quiet on the
real streams, raised 140 false alarms in 2e6 stationary 50% errors and takes ~600 examples on
the buffered flip; FHDDM (fed the correct bits: river's FHDDM reports a *drop* of its
input's mean) raises false alarms at 17-50% error; EDDM fires almost everywhere.

Measurements of ten detectors on 46 real streams, learning curves, stationary noise and label
flips, and why one-sided ADWIN with delta = 1e-4 is the default: ``docs/online.md`` ("Measured:
drift detectors").

Persistence
-----------
:meth:`DriftMonitor.get_state` is pickle-free.  The Rust ADWIN window has its own state
protocol (``__getstate__``/``__setstate__``: river's serde/bincode encoding of the buckets,
sums and counters, the bytes :func:`copy.deepcopy` goes through), saved as a ``uint8`` array;
everything else is a JSON-serialisable dict.  The window is bounded: (``max_buckets`` + 1)
bucket slots of 16 bytes per power of two of its width, 2,424 bytes for a window of 10^6
examples.  Restoring sets those bytes into a fresh window with the saved parameters, so the
monitor continues exactly (tested on long streams with drifts, cut at many points).  The
restored window must encode back to the same bytes and match the saved width and error
count.  If it does not (or river cannot decode the bytes: its Rust code then panics, which
is caught), and the saved river version differs from the installed one, the bytes are taken
for another release's layout: the window restarts empty with a :class:`RuntimeWarning`
(detection loses its history; the model is unaffected).  Under the same river version
:class:`ValueError` is raised (corrupt state; the state files' checksums catch corruption
before).  Replaying saved error bits into a fresh detector was not an option: ADWIN's
window, and so the bits it depends on, grows without bound on a stationary stream.
"""

from __future__ import annotations

import numbers
import warnings
from itertools import compress, count, islice
from typing import Any

import numpy as np
import river
from river.drift import ADWIN

__all__ = ["DriftMonitor"]

DEFAULT_DELTA = 1e-4
"""ADWIN confidence ``delta`` of :class:`DriftMonitor` (see the module's measurements)."""

_STATE_VERSION = 1


def _check_positive_int(name: str, value: Any) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _restore_window(window, data: bytes) -> bool:
    """Set river's encoded ADWIN state ``data`` into ``window``; False if it does not decode
    or does not encode back to the same bytes (another layout)."""
    try:
        window.__setstate__(data)
    except BaseException as exc:
        # a decoding error in river's Rust code surfaces as pyo3's PanicException, which
        # derives from BaseException (and prints a Rust backtrace); re-raise anything else
        # that is not an Exception (KeyboardInterrupt, SystemExit)
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        return False
    return window.__getstate__() == data


class DriftMonitor:
    """One-sided drift detector of a prequential 0/1 error stream (river's ADWIN, see the module).

    Parameters
    ----------
    delta : float in (0, 1), default :data:`DEFAULT_DELTA`
        ADWIN's confidence: smaller means fewer false alarms and slower detection.
    clock : int >= 1, default 1
        The window is tested for a change every ``clock`` examples.
    grace_period : int >= 1, default 10
        No test before the window holds this many examples (after each detection as well).
    min_window_length : int >= 1, default 5
        Both parts of a tested split hold at least this many examples.
    max_buckets : int >= 1, default 5
        Buckets of each size ADWIN keeps before merging two (its memory/precision trade-off).

    Attributes
    ----------
    n_seen : int
        Errors fed so far.
    n_detections : int
        Detections reported so far (error-rate increases only).
    last_detection_at : int or None
        ``n_seen`` as of the example that fired the last detection (1-based), None before any.
    last_rates : tuple of (float, float) or None
        Error rates of the dropped older part and the kept recent part of the window at the
        last detection (how severe it was), None before any.

    Raises
    ------
    ValueError
        On a parameter out of range.
    """

    def __init__(
        self,
        delta: float = DEFAULT_DELTA,
        clock: int = 1,
        grace_period: int = 10,
        min_window_length: int = 5,
        max_buckets: int = 5,
    ):
        if not isinstance(delta, numbers.Real) or isinstance(delta, bool) or not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be a float in (0, 1), got {delta!r}")
        self.delta = float(delta)
        self.clock = _check_positive_int("clock", clock)
        self.grace_period = _check_positive_int("grace_period", grace_period)
        self.min_window_length = _check_positive_int("min_window_length", min_window_length)
        self.max_buckets = _check_positive_int("max_buckets", max_buckets)
        self.n_seen = 0
        self.n_detections = 0
        self.last_detection_at: int | None = None
        self.last_rates: tuple[float, float] | None = None
        self._new_window()

    def _params(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "clock": self.clock,
            "grace_period": self.grace_period,
            "min_window_length": self.min_window_length,
            "max_buckets": self.max_buckets,
        }

    def _new_window(self) -> None:
        """Start an empty window."""
        # river's ADWIN wrapper restarts its whole window on the update after any detection;
        # its Rust core (the published algorithm) only drops the old part W0.  We drive the
        # core: dropping everything after an ignored *decrease* would also forget the recent
        # part, which can hide an increase that follows (see the module docstring).
        self._window = ADWIN(**self._params())._helper
        # width and error count of the window, kept here as exact ints so that the loop in
        # update() reads nothing from the detector unless it fired
        self._width = 0
        self._total = 0

    @property
    def width(self) -> int:
        """Examples in the current window (since the last detection, or fewer)."""
        return self._width

    @property
    def error_rate(self) -> float:
        """Error rate over the current window (0.0 if it is empty)."""
        return self._total / self._width if self._width else 0.0

    def update(self, errors) -> np.ndarray:
        """Feed prequential errors in stream order.

        Parameters
        ----------
        errors : (n,) array-like of bool, or of ints/floats equal to 0 or 1
            ``errors[i]`` is True when the model misclassified the i-th example before
            learning it.

        Returns
        -------
        (k,) int64 ndarray
            The positions in ``errors`` where a detection fired, increasing (usually empty).
            The result does not depend on how a stream is split into calls.

        Raises
        ------
        ValueError
            If ``errors`` is not one-dimensional or holds a value other than 0/1; the detector
            is unchanged then.
        """
        e = np.asarray(errors)
        if e.ndim != 1:
            raise ValueError(f"errors must be one-dimensional, got shape {e.shape}")
        if e.dtype != np.bool_:
            if not (np.issubdtype(e.dtype, np.integer) or np.issubdtype(e.dtype, np.floating)):
                raise ValueError(f"errors must be bool or 0/1 numbers, got dtype {e.dtype}")
            if not np.all((e == 0) | (e == 1)):
                raise ValueError("errors must hold only 0/1 (or False/True)")
        ints = e.astype(np.int8)
        bits = ints.tolist()  # Python ints: the cheapest argument for the Rust call
        # errors before position i: prefix[i] (the window's counts between cuts follow from it)
        prefix = np.concatenate(([0], np.cumsum(ints, dtype=np.int64))).tolist()
        fired = []
        window, width, total = self._window, self._width, self._total
        n, lo = len(bits), 0
        while lo < n:
            # feed bits[lo:] until ADWIN drops part of its window: the loop runs in C
            # (map calls the Rust update, compress yields the first position it returned True)
            hit = next(compress(count(lo), map(window.update, islice(bits, lo, None))), None)
            if hit is None:
                width, total = width + n - lo, total + prefix[n] - prefix[lo]
                break
            x = bits[hit]
            width, total = width + hit - lo, total + prefix[hit] - prefix[lo]
            lo = hit + 1
            # ADWIN dropped the older part W0 of the window and kept the recent part W1; report
            # only if W1 errs more: t1 / w1 > t0 / w0, cross-multiplied (all exact ints)
            w1, t1 = int(window.get_width()), int(window.get_total())
            w0, t0 = width + 1 - w1, total + x - t1
            if t1 * w0 > t0 * w1:
                fired.append(hit)
                self.n_detections += 1
                self.last_detection_at = self.n_seen + hit + 1
                self.last_rates = (t0 / w0, t1 / w1)
                # restart empty, as river's ADWIN does: W1 may still hold some examples from
                # before the change, and keeping them let each later check cut a few more
                # of them, each cut one more detection of the same increase
                self._new_window()
                window, width, total = self._window, 0, 0
            else:
                width, total = w1, t1
        self._width, self._total = width, total
        self.n_seen += n
        return np.asarray(fired, dtype=np.int64)

    def get_state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Pickle-free state: ``(arrays, meta)``.

        Returns
        -------
        arrays : dict
            ``window``: (m,) uint8, river's own encoding of the ADWIN window (see the module).
        meta : dict
            JSON-serialisable: ``version``, ``detector`` (``"ADWIN"``), ``river`` (version that
            wrote ``window``), the parameters, ``n_seen``, ``n_detections``,
            ``last_detection_at``, ``width`` and ``total`` (errors in the window).
        """
        # __getstate__ is the Rust object's serde state (what copy.deepcopy uses)
        window = np.frombuffer(self._window.__getstate__(), dtype=np.uint8).copy()
        meta = {
            "version": _STATE_VERSION,
            "detector": "ADWIN",
            "river": river.__version__,
            **self._params(),
            "n_seen": int(self.n_seen),
            "n_detections": int(self.n_detections),
            "last_detection_at": None if self.last_detection_at is None else int(self.last_detection_at),
            "last_rates": None if self.last_rates is None else [float(r) for r in self.last_rates],
            "width": int(self._width),
            "total": int(self._total),
        }
        return {"window": window}, meta

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> DriftMonitor:
        """Rebuild the monitor :meth:`get_state` described; it continues exactly (the same
        future errors give the same detections as the uninterrupted monitor).

        Raises
        ------
        ValueError
            On an unknown version or detector, or, under the river version that wrote it, a
            window that does not restore: it does not decode, does not encode back to the
            same bytes, or differs from the saved width and error count (corrupt state).

        Warns
        -----
        RuntimeWarning
            If the window was written by another river version and does not restore: the
            window restarts empty (counters are kept).
        """
        if meta.get("version") != _STATE_VERSION or meta.get("detector") != "ADWIN":
            raise ValueError(
                f"unknown drift state (version {meta.get('version')!r}, detector {meta.get('detector')!r})"
            )
        mon = cls(
            float(meta["delta"]),
            int(meta["clock"]),
            int(meta["grace_period"]),
            int(meta["min_window_length"]),
            int(meta["max_buckets"]),
        )
        mon.n_seen = int(meta["n_seen"])
        mon.n_detections = int(meta["n_detections"])
        last = meta["last_detection_at"]
        mon.last_detection_at = None if last is None else int(last)
        rates = meta.get("last_rates")
        mon.last_rates = None if rates is None else (float(rates[0]), float(rates[1]))
        width, total = int(meta["width"]), int(meta["total"])
        window = np.asarray(arrays["window"])
        restored = (
            window.dtype == np.uint8
            and window.ndim == 1
            and _restore_window(mon._window, window.tobytes())
            and mon._window.get_width() == width
            and mon._window.get_total() == total
        )
        if restored:
            mon._width, mon._total = width, total
        elif meta.get("river") != river.__version__:
            warnings.warn(
                f"drift window written by river {meta.get('river')} does not restore under river "
                f"{river.__version__}; the drift window restarts empty",
                RuntimeWarning,
                stacklevel=2,
            )
            mon._new_window()
        else:
            raise ValueError("corrupt drift state: the ADWIN window does not restore to its saved size")
        return mon
