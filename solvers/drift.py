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

Measurements
------------
Real streams: the prequential errors of ``BudgetedSGDClassifier(budget=500, random_state=s)``
(other parameters default: warm-up 1,000, shuffle buffer 20,000), fed a data set shuffled
with seed s in batches of 500, then ``flush()``.  FA = streams with at least one detection:
ijcnn1 1 pass (25 seeds, 49,990 errors each; error rate 0.12 over the first 2,000 falling to
0.03), a9a 1 pass (10 seeds, 32,561 each, ~0.17), "other" = ijcnn1 3 passes (3 seeds,
149,970), phishing (5 seeds, 11,055, ~0.07) and skin_nonskin (3 seeds, 245,057, ~0.006).
Learning curves: 100 synthetic streams of 50,000 errors, P(error) = 0.03 + 0.47 exp(-i/5000).
Stationary: detections in 2e6 i.i.d. Bernoulli(0.5) / Bernoulli(0.17) errors.
Flips: 3 passes of ijcnn1 or a9a, each reshuffled, labels negated from the first example of
pass 2; "delay (n)" = examples learned from the flip to the first detection for seeds 0, 1,
2 (n = detections over passes 2-3; "pre k" = k detections in pass 1).  With
``shuffle_buffer=0`` the learned stream flips at once (ijcnn1: error 0.56-0.82 over the next
50 examples; the learner is back to ~0.1 after 150 examples and 0.05 after 20,000).  Through
a buffer the flipped rows enter learning gradually (buffer 20,000: the error climbs from 0.03
to ~0.5 over ~10,000 examples), a long, slow increase that every detector reports several
times.  µs = time per example of one update on 1e6 errors (p = 0.05; river's detectors in a
Python loop).

=================================  ==========  =======  ======  ===========  ================  ===================  =================  ======================  =====
detector (confidence)              ijcnn1 FA   a9a FA   other   curves FA    FA 2e6 p=.5/.17   ijcnn1 flip, buf 0   a9a flip, buf 0    ijcnn1 flip, buf 1,000  µs
                                                        FA                                                                             / buf 20,000
=================================  ==========  =======  ======  ===========  ================  ===================  =================  ======================  =====
river ADWIN 2e-3 as is (2-sided)   25/25       10/10    11/11   100/100      0 / 0             26,26,26 (5,6,4)     111,79,47 (2,3,2)  194,226,194 (7,7,5) /   0.37
                                                                                               pre 6                pre 3              1507,1226,1049 (11,..)
DDM drift_threshold=3              10/25       1/10     2/11    5/100        0 / 0             429,390,1031 (1,1,5) never              474,496,441 / 2227,..   0.58
DDM drift_threshold=4              4/25        0/10     0/11    0/100        0 / 0             1003,885,1972        never              576,624,568 / 2619,..   0.49
EDDM                               24/25       10/10    6/11    85/100       16 / 8            5544,5249,3444       never (pre 69)     1625,1564,1404 / 3430   0.21
HDDM_A 1e-3                        3/25        2/10     0/11    3/100        1 / 4             10,8,14 (2,1,1)      352,153,19242      224,238,228 / 2356,..   3.28
HDDM_A 1e-4                        1/25        1/10     0/11    0/100        0 / 0             12,10,17 (1,1,1)     428,186,never      279,280,240 / 2485,..   3.12
HDDM_A 1e-5                        0/25        0/10     0/11    0/100        0 / 0             15,11,19 (1,1,1)     never,95,never     303,292,248 / 2601,..   4.04
HDDM_W 1e-3 (lambda 0.05)          1/25        8/10     0/11    75/100       1607 / 62         12,11,11 (1,1,1)     10,6,9 (pre 3)     373,423,248 / 2816,..   4.72
HDDM_W 1e-5 (lambda 0.05)          0/25        0/10     0/11    0/100        140 / 0           20,16,15 (1,1,1)     24,20,17 (1,1,1)   543,629,571 / 5931,..   3.84
FHDDM window 100, 1e-6             0/25        6/10     0/11    8/100        477 / 33          31,26,33 (1,1,1)     49,15,24 (2,1,1)   216,279,243 / 2782,..   0.31
FHDDM window 200, 1e-6             0/25        1/10     0/11    2/100        261 / 25          55,38,66 (1,1,1)     110,56,100         247,265,243 / 2623,..   0.31
**one-sided ADWIN 2e-3**           0/25        0/10     0/11    0/100        0 / 0             13,13,13 (1,1,1)     113,78,24 (1,1,1)  168,201,186 (2,2,1) /   0.48
                                                                                                                                       1604,1295,1047 (4,4,4)
**one-sided ADWIN 1e-3**           0/25        0/10     0/11    0/100        0 / 0             15,14,13 (1,1,1)     144,85,29 (1,1,1)  169,204,188 (2,2,1) /   0.50
                                                                                                                                       1610,1317,1070 (4,4,4)
**one-sided ADWIN 1e-4** (default) 0/25        0/10     0/11    0/100        0 / 0             19,16,16 (1,1,1)     175,95,70 (1,1,1)  178,217,203 (1,2,1) /   0.50
                                                                                                                                       1644,1383,1113 (3,4,3)
**one-sided ADWIN 1e-5**           0/25        0/10     0/11    0/100        0 / 0             21,18,18 (1,1,1)     408,164,155        204,221,216 (1,1,1) /   0.62
                                                                                                                                       1671,1488,1222 (3,3,3)
**one-sided ADWIN 1e-4, clock 32** 0/25        0/10     0/11    0/100        0 / 0             26,26,26 (1,1,1)     175,111,111        194,226,226 / 1667,..   0.12
=================================  ==========  =======  ======  ===========  ================  ===================  =================  ======================  =====

The default ``delta = 1e-4``: the one-sided ADWIN first raised false alarms on the real streams
at ``delta = 0.03`` (3 detections over the 46 streams; 15 at 0.1, 81 at 0.3; none at 0.01),
so 1e-4 keeps a factor 300 of margin for 3-41 more examples of delay than 1e-3 on the flips
above.  After a synthetic learning curve (as above, 50,000 examples) the error jumping from
0.03 to 0.9 / 0.2 / 0.1 is detected after a median of 16 / 123 / 327 examples (largest 20 /
173 / 534 of 20 runs).  In 256-example calls (as the budgeted estimators feed it) an update
costs 0.5-0.6 µs per example, as in one call of 10^6; a call of one example costs ~2 µs.

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
        bits = e.astype(np.int8).tolist()  # Python ints: the cheapest argument for the Rust call
        fired = []
        window, width, total = self._window, self._width, self._total
        step = window.update
        for i, x in enumerate(bits):
            if not step(x):
                width += 1
                total += x
                continue
            # ADWIN dropped the older part W0 of the window and kept the recent part W1; report
            # only if W1 errs more: t1 / w1 > t0 / w0, cross-multiplied (all exact ints)
            w1, t1 = int(window.get_width()), int(window.get_total())
            w0, t0 = width + 1 - w1, total + x - t1
            if t1 * w0 > t0 * w1:
                fired.append(i)
                self.n_detections += 1
                self.last_detection_at = self.n_seen + i + 1
                self.last_rates = (t0 / w0, t1 / w1)
                # restart empty, as river's ADWIN does: W1 may still hold some examples from
                # before the change, and keeping them let each later check cut a few more
                # of them, each cut one more detection of the same increase
                self._new_window()
                window, width, total = self._window, 0, 0
                step = window.update
            else:
                width, total = w1, t1
        self._width, self._total = width, total
        self.n_seen += len(bits)
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
